//go:build integration

package webtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestIntegrationSubmitWaitsForItsPage: a page whose own load event is
// held (an image answered only once the button is clicked), reached by a
// script's redirect nothing waits out, holds a form that is submitted
// after that load event and answered 2 s later. Submit must return on the form's page,
// not on the load event of the page it left. Beside stress-ng the
// dashboard test lost that race: the login page's own late load event
// ended the re-login's Submit, the next Navigate took the job page's,
// and Fill ran in a document not yet parsed ("no #cancel-reason").
func TestIntegrationSubmitWaitsForItsPage(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>start</title><p>start</p>`)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
		// The image holds the page's load event until the click releases
		// it; the form is submitted 100 ms after that load event: the
		// page being left fires its load while Submit waits.
		fmt.Fprint(w, `<!doctype html><title>slow</title><form method="post" action="/done"><button type="button"
onclick="var f=this.form;window.addEventListener('load',function(){setTimeout(function(){f.submit()},100)});fetch('/release')">go</button></form><img src="/img">`)
	})
	mux.HandleFunc("/release", func(w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { close(release) })
	})
	mux.HandleFunc("/img", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
	})
	mux.HandleFunc("/done", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `<!doctype html><title>done</title><p id="done">done</p>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	b := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := b.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Navigate(ctx, srv.URL+"/start"); err != nil {
		t.Fatal(err)
	}
	// A script moves the page on (the dashboard's reload when a stream
	// ends); nothing waits for that page's load.
	if err := p.Eval(ctx, `location.href = "/slow"`, nil); err != nil {
		t.Fatal(err)
	}
	// /slow has committed; its image, and so its load event, is still to
	// come.
	if err := p.WaitFor(ctx, `location.pathname === "/slow" && document.querySelector("form button")`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var state string
	if err := p.Eval(ctx, "document.readyState", &state); err != nil || state == "complete" {
		t.Fatalf("/slow is %q (%v) before Submit; want its load still to come", state, err)
	}
	if err := p.Submit(ctx, "form button"); err != nil {
		t.Fatal(err)
	}
	var path string
	if err := p.Eval(ctx, "location.pathname", &path); err != nil {
		t.Fatal(err)
	}
	if path != "/done" {
		t.Errorf("Submit returned on %s, want the form's answer /done: it took the load event of the page it left", path)
	}
}
