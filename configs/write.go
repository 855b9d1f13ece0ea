package configs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// WriteYAML writes c to path as YAML with every key, named as Load reads them, so that
// Load(path, nil) returns c again. The file appears whole or not at all: c goes to a
// temporary file in the same directory, is synced, and is renamed over path.
func (c Config) WriteYAML(path string) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2) // as the shipped configs are written
	if err := enc.Encode(c); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(buf.Bytes())
	if err == nil {
		err = f.Chmod(0o644) // CreateTemp makes the file private; a run record is not
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
