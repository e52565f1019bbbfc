//go:build unix

package sqlite

import (
	"os"
	"syscall"

	"github.com/botplatform/api/shared/store"
)

// openReadCache maps the first page of the database's -shm file; without it (no file, a
// platform that keeps the wal-index elsewhere) Get reads every time.
func openReadCache(shmPath string) *readCache {
	c := &readCache{items: make(map[store.Key]store.Item)}
	f, err := os.Open(shmPath)
	if err != nil {
		return c
	}
	defer f.Close() // the mapping outlives the descriptor
	if fi, err := f.Stat(); err != nil || fi.Size() < 4096 {
		return c
	}
	shm, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return c
	}
	c.shm, c.unmap = shm, func() error { return syscall.Munmap(shm) }
	return c
}
