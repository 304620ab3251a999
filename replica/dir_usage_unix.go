//go:build unix

package replica

import "syscall"

// volumeBytes is the total and usable size of the volume holding dir
// (Kafka's FileStore getTotalSpace/getUsableSpace), -1 when unknown.
func volumeBytes(dir string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	bsize := uint64(st.Bsize) // int64 on linux, uint32 on darwin
	return int64(uint64(st.Blocks) * bsize), int64(uint64(st.Bavail) * bsize)
}
