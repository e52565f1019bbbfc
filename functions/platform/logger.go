package platform

import (
	"io"
	"log/slog"
	"os"
	"strings"
)

// Logger is the JSON logger every Lambda writes to CloudWatch, at the level in LOG_LEVEL
// (debug, info, warn, error; default info).
func Logger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToLower(os.Getenv("LOG_LEVEL")) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}
