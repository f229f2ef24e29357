package lifecycle

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestEnvFileValue(t *testing.T) {
	for _, tc := range []struct {
		name, content, key string
		want               string
		wantErr            string
	}{
		{name: "simple", content: "A='1'\nB='2'\n", key: "B", want: "2"},
		{name: "missing key", content: "A='1'\n", key: "B", want: ""},
		{name: "comments and blank lines", content: "# c\n\n   \n  A='x' # trailing\n", key: "A", want: "x"},
		{name: "literal content", content: `A='$(B) \n "q"'`, key: "A", want: `$(B) \n "q"`},
		{name: "multi-line", content: "A='one\ntwo'\nB='3'\n", key: "A", want: "one\ntwo"},
		{name: "multi-line before the key", content: "A='one\ntwo'\nB='3'\n", key: "B", want: "3"},
		{name: "blank after equals is empty", content: "A= 'x'\n", key: "A", want: ""},
		{name: "first assignment wins", content: "A='1'\nA='2'\n", key: "A", want: "1"},
		{name: "error after the key is not read", content: "A='1'\nbroken\n", key: "A", want: "1"},
		{name: "no equals", content: "broken\nA='1'\n", key: "A",
			wantErr: "invalid environment variable format at line 1: missing '='"},
		{name: "empty name", content: "='1'\n", key: "A",
			wantErr: "invalid environment variable format at line 1: empty variable name"},
		{name: "blank before equals", content: "A ='1'\n", key: "A",
			wantErr: "invalid environment variable format at line 1: whitespace before '=' is not allowed"},
		{name: "unquoted", content: "# x\nA=1\n", key: "A",
			wantErr: "invalid environment variable format at line 2: value must be enclosed in single quotes"},
		{name: "double quoted", content: `A="1"`, key: "A",
			wantErr: "invalid environment variable format at line 1: value must be enclosed in single quotes"},
		{name: "content after quote", content: "A='1' x\n", key: "A",
			wantErr: "invalid environment variable format at line 1: unexpected content after closing quote"},
		{name: "unclosed", content: "\nA='1\nB\n", key: "B",
			wantErr: "invalid environment variable format starting at line 2: unclosed single quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "env")
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := envFileValue(p, tc.key)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("envFileValue = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := envFileValue(filepath.Join(t.TempDir(), "none"), "A"); err == nil {
		t.Error("a missing file gave no error")
	}
}

// pathVolumes is a volume manager that names the host directory of each
// volume in dirs.
type pathVolumes struct {
	*fakeVolumes
	dirs map[string]string
}

func (p pathVolumes) VolumePath(_ *v1.Pod, name string) (string, bool) {
	d, ok := p.dirs[name]
	return d, ok
}

func fileEnv(name, vol, path, key string, opt *bool) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{
		VolumeName: vol, Path: path, Key: key, Optional: opt}}}
}

func TestMakeEnvironmentFileKeyRef(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.env"), []byte("DB='db.example'\nEMPTY=''\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.env"), []byte("DB='x'\nBAD\nAFTER='y'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     []v1.EnvVar
		vols    Volumes
		want    string
		wantErr string
	}{
		{name: "value", env: []v1.EnvVar{fileEnv("DB_HOST", "cfg", "config.env", "DB", nil)},
			want: "DB_HOST=db.example"},
		{name: "expanded by later variables", env: []v1.EnvVar{
			fileEnv("DB_HOST", "cfg", "config.env", "DB", nil), {Name: "URL", Value: "pg://$(DB_HOST)"}},
			want: "DB_HOST=db.example;URL=pg://db.example"},
		{name: "missing key, optional: undefined", env: []v1.EnvVar{fileEnv("X", "cfg", "config.env", "NOPE", ptr.To(true))},
			want: ""},
		{name: "empty value, optional: undefined", env: []v1.EnvVar{fileEnv("X", "cfg", "config.env", "EMPTY", ptr.To(true))},
			want: ""},
		{name: "missing key", env: []v1.EnvVar{fileEnv("X", "cfg", "config.env", "NOPE", nil)},
			wantErr: `environment variable key "NOPE" not found in file "` + filepath.Join(dir, "config.env") + `"`},
		{name: "empty value", env: []v1.EnvVar{fileEnv("X", "cfg", "config.env", "EMPTY", ptr.To(false))},
			wantErr: `environment variable key "EMPTY" not found in file "` + filepath.Join(dir, "config.env") + `"`},
		{name: "missing file, even optional", env: []v1.EnvVar{fileEnv("X", "cfg", "none.env", "DB", ptr.To(true))},
			wantErr: "couldn't parse env file"},
		{name: "bad line before the key", env: []v1.EnvVar{fileEnv("X", "cfg", "bad.env", "AFTER", nil)},
			wantErr: "couldn't parse env file"},
		{name: "symlink stays inside the volume", env: []v1.EnvVar{fileEnv("X", "cfg", "escape/hostname", "A", nil)},
			wantErr: "couldn't parse env file"},
		{name: "unknown volume", env: []v1.EnvVar{fileEnv("X", "other", "config.env", "DB", nil)},
			wantErr: `cannot find the volume "other" referenced by FileKeyRef`},
		{name: "no volume manager", vols: newFakeVolumes(), env: []v1.EnvVar{fileEnv("X", "cfg", "config.env", "DB", nil)},
			wantErr: `cannot find the volume "cfg" referenced by FileKeyRef`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := envPod(v1.Container{Name: "c", Env: tc.env})
			vols := tc.vols
			if vols == nil {
				vols = pathVolumes{fakeVolumes: newFakeVolumes(), dirs: map[string]string{"cfg": dir}}
			}
			s := &syncer{objects: &fakeObjects{}, volumes: vols}
			got, err := s.makeEnvironment(context.Background(), pod, &pod.Spec.Containers[0], nil)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := envString(got); s != tc.want {
				t.Errorf("environment %q, want %q", s, tc.want)
			}
		})
	}
}
