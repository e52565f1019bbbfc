package sqlitelog

import "os"

// mkdirTemp makes the benchmarks' directory, shared by all of them; the OS cleans it.
func mkdirTemp() (string, error) { return os.MkdirTemp("", "sqlitelog-bench-") }
