//go:build !linux

package protocol

import (
	"net"
	"os"
)

// sendFile is not implemented here: the caller copies.
func sendFile(net.Conn, *os.File, int64, int64) (int64, bool, error) { return 0, false, nil }
