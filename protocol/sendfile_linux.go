package protocol

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// maxSendfileChunk bounds one sendfile(2) call, as Go's own
// internal/poll.SendFile does.
const maxSendfileChunk = 4 << 20

// sendFile sends n bytes of f from off to a TCP connection with
// sendfile(2), at an explicit offset (pread-style: f's file offset is
// shared by every sender of the segment and never moves). Go's
// (*net.TCPConn).ReadFrom would use sendfile too, but from and advancing
// the file offset, which concurrent senders of one segment would race on.
//
// The source descriptor is held through RawConn.Control (a reference, not
// the read lock, so senders of one file do not serialize); the socket is
// written through RawConn.Write, which waits for writability in the
// netpoller and honours the write deadline like Write. handled is false
// for a connection that is not plain TCP (the caller copies).
func sendFile(nc net.Conn, f *os.File, off, n int64) (sent int64, handled bool, err error) {
	tc, ok := nc.(*net.TCPConn)
	if !ok || n == 0 {
		return 0, ok, nil
	}
	dst, err := tc.SyscallConn()
	if err != nil {
		return 0, true, err
	}
	src, err := f.SyscallConn()
	if err != nil {
		return 0, true, err
	}
	var werr, ferr error
	cerr := src.Control(func(sfd uintptr) {
		werr = dst.Write(func(dfd uintptr) bool {
			for sent < n {
				pos := off + sent
				k, err := syscall.Sendfile(int(dfd), int(sfd), &pos, int(min(n-sent, maxSendfileChunk)))
				if k > 0 {
					sent += int64(k)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // wait until the socket is writable
				case errors.Is(err, syscall.EINTR):
				case err != nil:
					ferr = os.NewSyscallError("sendfile", err)
					return true
				case k == 0:
					ferr = fmt.Errorf("%w: %s ends before %d", ErrRegionShort, f.Name(), off+n)
					return true
				}
			}
			return true
		})
	})
	for _, err := range []error{cerr, werr, ferr} {
		if err != nil {
			return sent, true, err
		}
	}
	return sent, true, nil
}
