package sqlite

import (
	"os"
	"syscall"
)

// datasync flushes f's data and the metadata needed to read it back (its size), not its
// times: SQLite rewrites the WAL in place once it has grown, so fdatasync spares the file
// system a journal commit for the modification time on every sync.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
