//go:build !linux

package mcp

import "os/exec"

// setProcAttr leaves the command as is outside Linux.
func setProcAttr(*exec.Cmd) {}
