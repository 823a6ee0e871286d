package webtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Page is one tab.
type Page struct {
	c       *conn
	session string
	target  string
	stopLog func()
	// browserContext holds the tab's cookies (Browser.Sibling shares it).
	browserContext string

	mu       sync.Mutex
	problems []string // console errors, exceptions, CSP refusals
}

// collect keeps what went wrong in the page: console errors (CSP
// refusals among them) and uncaught exceptions.
func (p *Page) collect(ev event) {
	if ev.SessionID != p.session {
		return
	}
	var msg string
	switch ev.Method {
	case "Log.entryAdded":
		var e struct {
			Entry struct{ Level, Text, URL string } `json:"entry"`
		}
		if json.Unmarshal(ev.Params, &e) == nil && e.Entry.Level == "error" {
			msg = "console: " + e.Entry.Text + " " + e.Entry.URL
		}
	case "Runtime.exceptionThrown":
		var e struct {
			ExceptionDetails struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		if json.Unmarshal(ev.Params, &e) == nil {
			msg = "exception: " + e.ExceptionDetails.Text + " " + e.ExceptionDetails.Exception.Description
		}
	}
	if msg != "" {
		p.mu.Lock()
		p.problems = append(p.problems, msg)
		p.mu.Unlock()
	}
}

// Problems returns and forgets what went wrong in the page since the
// last call.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.problems
	p.problems = nil
	return out
}

// Close closes the tab.
func (p *Page) Close() {
	p.stopLog()
	_ = p.c.call(context.Background(), "", "Target.closeTarget", map[string]any{"targetId": p.target}, nil)
}

// Call sends any CDP command in the page's session.
func (p *Page) Call(ctx context.Context, method string, params, out any) error {
	return p.c.call(ctx, p.session, method, params, out)
}

// Loaded runs action (a navigation, a click that submits a form) and
// waits for the page it leads to to fire its load event: the first load
// event after a new document committed in the main frame
// (Page.frameNavigated without a parent). A load event alone could be the
// page being left, still loading when the action began (one a script
// moved to and nothing waited for); the document it belongs to is gone
// once the new one commits, so none of its events come after that.
func (p *Page) Loaded(ctx context.Context, action func() error) error {
	loaded := make(chan struct{}, 1)
	var committed atomic.Bool
	stop := p.c.listen(func(ev event) {
		if ev.SessionID != p.session {
			return
		}
		switch ev.Method {
		case "Page.frameNavigated":
			var e struct {
				Frame struct {
					ParentID string `json:"parentId"`
				} `json:"frame"`
			}
			if json.Unmarshal(ev.Params, &e) == nil && e.Frame.ParentID == "" {
				committed.Store(true)
			}
		case "Page.loadEventFired":
			if !committed.Load() {
				return // the page being left
			}
			select {
			case loaded <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	if err := action(); err != nil {
		return err
	}
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the page to load: %w", ctx.Err())
	}
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(ctx context.Context, url string) error {
	return p.Loaded(ctx, func() error {
		var r struct {
			ErrorText string `json:"errorText"`
		}
		if err := p.Call(ctx, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
			return err
		}
		if r.ErrorText != "" {
			return fmt.Errorf("navigating to %s: %s", url, r.ErrorText)
		}
		return nil
	})
}

// Eval evaluates a JavaScript expression in the page (a promise is
// awaited) and decodes its value into out (nil: dropped).
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.Call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("evaluating %q: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Text is the text of the first element matching a CSS selector ("" when
// none matches).
func (p *Page) Text(ctx context.Context, selector string) (string, error) {
	var s string
	err := p.Eval(ctx, fmt.Sprintf(`(function(){var e=document.querySelector(%q);return e?e.innerText:""})()`, selector), &s)
	return s, err
}

// Count is how many elements match a CSS selector.
func (p *Page) Count(ctx context.Context, selector string) (int, error) {
	var n int
	err := p.Eval(ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, selector), &n)
	return n, err
}

// WaitFor polls a JavaScript condition until it is true or timeout.
func (p *Page) WaitFor(ctx context.Context, cond string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		err := p.Eval(ctx, "!!("+cond+")", &ok)
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("waiting for %s: %w", cond, err)
			}
			return fmt.Errorf("waiting for %s: %w after %s", cond, errTimeout, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Fill sets a form field's value as typing would.
func (p *Page) Fill(ctx context.Context, selector, value string) error {
	return p.Eval(ctx, fmt.Sprintf(`(function(){var e=document.querySelector(%q);if(!e)throw new Error("no "+%q);e.focus();e.value=%q;
e.dispatchEvent(new Event("input",{bubbles:true}));e.dispatchEvent(new Event("change",{bubbles:true}));return true})()`, selector, selector, value), nil)
}

// Submit clicks an element (a submit button) and waits for the page the
// form leads to.
func (p *Page) Submit(ctx context.Context, selector string) error {
	return p.Loaded(ctx, func() error {
		return p.Eval(ctx, fmt.Sprintf(`(function(){var e=document.querySelector(%q);if(!e)throw new Error("no "+%q);e.click();return true})()`, selector, selector), nil)
	})
}

// Viewport sets the page's size; mobile emulates a phone (touch, the
// viewport meta tag honoured).
func (p *Page) Viewport(ctx context.Context, width, height int, mobile bool) error {
	return p.Call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height,
		"deviceScaleFactor": 1, "mobile": mobile}, nil)
}

// Dark makes the page see prefers-color-scheme: dark (or light).
func (p *Page) Dark(ctx context.Context, dark bool) error {
	v := "light"
	if dark {
		v = "dark"
	}
	return p.Call(ctx, "Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": v}}}, nil)
}

// Screenshot writes the page as PNG; full: the whole page, not only the
// viewport.
func (p *Page) Screenshot(ctx context.Context, path string, full bool) error {
	params := map[string]any{"format": "png"}
	if full {
		var m struct {
			CSSContentSize struct{ Width, Height float64 } `json:"cssContentSize"`
		}
		if err := p.Call(ctx, "Page.getLayoutMetrics", nil, &m); err != nil {
			return err
		}
		params["captureBeyondViewport"] = true
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": min(m.CSSContentSize.Height, 12000), "scale": 1}
	}
	var r struct {
		Data string `json:"data"`
	}
	if err := p.Call(ctx, "Page.captureScreenshot", params, &r); err != nil {
		return err
	}
	b, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Cookie is one cookie as the browser keeps it.
type Cookie struct {
	Name     string  `json:"name"`
	Value    string  `json:"value"`
	Path     string  `json:"path"`
	Expires  float64 `json:"expires"`
	HTTPOnly bool    `json:"httpOnly"`
	Secure   bool    `json:"secure"`
	SameSite string  `json:"sameSite"`
}

// Cookies are the cookies the page's context holds for url.
func (p *Page) Cookies(ctx context.Context, url string) ([]Cookie, error) {
	var r struct {
		Cookies []Cookie `json:"cookies"`
	}
	err := p.Call(ctx, "Network.getCookies", map[string]any{"urls": []string{url}}, &r)
	return r.Cookies, err
}

// URL is the page's location.
func (p *Page) URL(ctx context.Context) (string, error) {
	var s string
	err := p.Eval(ctx, "location.href", &s)
	return s, err
}

// Has reports whether the page's text contains every one of texts; the
// first missing one is named.
func (p *Page) Has(ctx context.Context, texts ...string) error {
	var body string
	if err := p.Eval(ctx, "document.body.innerText", &body); err != nil {
		return err
	}
	for _, t := range texts {
		if !strings.Contains(body, t) {
			return fmt.Errorf("the page does not say %q", t)
		}
	}
	return nil
}

// Press sends one key press (a key name such as "Tab" or "Enter") to the
// focused element.
func (p *Page) Press(ctx context.Context, key string) error {
	codes := map[string]int{"Tab": 9, "Enter": 13}
	for _, typ := range []string{"keyDown", "keyUp"} {
		if err := p.Call(ctx, "Input.dispatchKeyEvent", map[string]any{"type": typ, "key": key, "code": key,
			"windowsVirtualKeyCode": codes[key]}, nil); err != nil {
			return err
		}
	}
	return nil
}
