//go:build linux

package main

import "syscall"

// devSysProcAttr puts a dev node in its own process group, so a Ctrl-C at
// the terminal reaches only kraftd dev, which then stops the nodes in order
// (brokers first) instead of every process racing to exit at once. Pdeathsig
// stops the node if kraftd dev itself dies without stopping it (kill -9).
func devSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
