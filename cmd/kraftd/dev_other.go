//go:build !linux

package main

import "syscall"

// devSysProcAttr: elsewhere the nodes share the terminal's process group, so
// Ctrl-C reaches them too; each stops on its own and kraftd dev still waits
// for all of them.
func devSysProcAttr() *syscall.SysProcAttr { return nil }
