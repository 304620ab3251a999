//go:build !unix

package replica

// volumeBytes is unknown off unix (Kafka's UNKNOWN_VOLUME_BYTES).
func volumeBytes(string) (total, usable int64) { return -1, -1 }
