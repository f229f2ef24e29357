package eviction

import (
	"testing"
	"time"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a summary: no error")
	}
	m, err := New(Config{Summary: fixedSummary(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if m.cfg.MonitoringPeriod != 10*time.Second || m.cfg.Clock == nil {
		t.Errorf("defaults not filled: %+v", m.cfg)
	}
	if _, err := New(Config{Summary: fixedSummary(nil), PressureTransitionPeriod: -time.Second}); err == nil {
		t.Error("negative transition period: no error")
	}
}
