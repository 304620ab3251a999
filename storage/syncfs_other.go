//go:build !linux

package storage

import (
	"errors"
	"os"
)

// syncfs is not available: FlushTopicIDs flushes each log alone.
func syncfs(*os.File) error { return errors.New("storage: no syncfs") }

func syncfsReportsErrors() bool { return false }

func deviceOf(string) (uint64, error) { return 0, errors.New("storage: no device ids") }
