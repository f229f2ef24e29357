//go:build !linux

package eviction

import "errors"

func newMemcg(string) (memcg, error) {
	return nil, errors.New("memcg threshold notification is only supported on Linux")
}

func (c cgroupV1) Arm(int64) (cgroupNotifier, error) {
	return nil, errors.New("memcg threshold notification is only supported on Linux")
}
