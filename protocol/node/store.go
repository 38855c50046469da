package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// stateFileMode keeps a node's record to its user.
const stateFileMode = 0o600

// load reads the record the node saved before it last stopped, or nil.
func (n *Node) load() (any, error) {
	if n.cfg.StateFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(n.cfg.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: %s: %w", n.cfg.Name, err)
	}
	m, err := n.codec.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("node: %s: saved record %s: %w", n.cfg.Name, n.cfg.StateFile, err)
	}
	return m, nil
}

// Save is the host's: the record is durable (written, synced, renamed
// into place, its folder synced) before Save returns, so a crash after it
// finds the record, and one during it the record before.
func (n *Node) Save(m any) {
	frame, err := n.codec.Append(nil, m)
	if err == nil && n.cfg.StateFile != "" {
		err = writeDurably(n.cfg.StateFile, frame)
	}
	if err != nil {
		n.stop(fmt.Errorf("node: %s: save: %w", n.cfg.Name, err))
		return
	}
	if n.cfg.AfterSave != nil {
		n.cfg.AfterSave(m)
	}
}

func writeDurably(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, stateFileMode)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
