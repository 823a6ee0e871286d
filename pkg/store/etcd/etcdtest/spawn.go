package etcdtest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Pdeathsig (the child killed when its parent dies) fires when the OS
// thread that started the child exits, not only the process: a thread
// that entered a network namespace (netns.NS.Do) is thrown away when its
// goroutine ends, and a child started on it earlier dies with it. So
// children are started from one thread that is locked and never exits.

var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// StartProcess starts cmd so that it is killed (SIGKILL) when the test
// binary dies, however it dies, and not before.
func StartProcess(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	done := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}
