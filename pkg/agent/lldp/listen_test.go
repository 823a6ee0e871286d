package lldp

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// Interfaces that cannot be opened are left out, and Listen does not wait
// for them. (Hearing frames needs namespaces: listen_integration_test.go.)
func TestListenWithoutInterfaces(t *testing.T) {
	start := time.Now()
	got := Listen(context.Background(), []string{"ingot-none0"}, time.Minute)
	if len(got) != 0 || time.Since(start) > 5*time.Second {
		t.Errorf("Listen = %v after %s, want nothing at once", got, time.Since(start))
	}
	l, err := Start([]string{"ingot-none0", "ingot-none1"})
	if err == nil || !strings.Contains(err.Error(), "ingot-none0") || !strings.Contains(err.Error(), "ingot-none1") {
		t.Errorf("Start err = %v, want both interfaces named", err)
	}
	if got := l.Wait(context.Background()); len(got) != 0 {
		t.Errorf("Wait = %v", got)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	l.Close() // twice is fine
}

// A packet socket's protocol is in network byte order in memory.
func TestHtons(t *testing.T) {
	if got := binary.NativeEndian.AppendUint16(nil, htons(EtherType)); !bytes.Equal(got, []byte{0x88, 0xcc}) {
		t.Errorf("htons(0x88cc) lies in memory as % x, want 88 cc", got)
	}
}
