package vbmc

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// session is one login (POST SessionService/Sessions).
type session struct {
	id, token, user string
	used            time.Time // last request with the token
}

// authorize accepts an X-Auth-Token of an open session or basic credentials
// of an account with a password that is not locked out; otherwise it answers
// 401 and returns false. Basic credentials are a login each: they count
// towards the account lockout (see Lockout). A BMC without Config.Username
// accepts everything.
func (b *BMC) authorize(w http.ResponseWriter, r *http.Request) bool {
	if b.cfg.Username == "" {
		return true
	}
	b.mu.Lock()
	ok := false
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		ok = b.useSession(tok)
	} else if u, p, has := r.BasicAuth(); has {
		ok = b.checkLogin(u, p)
	}
	b.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="ingot vbmc"`)
		writeError(w, http.StatusUnauthorized, msgUnauthorized())
	}
	return ok
}

// useSession reports whether tok names a live session and marks it used;
// a session idle past Config.SessionTimeout is deleted instead. b.mu held.
func (b *BMC) useSession(tok string) bool {
	s, ok := b.sessions[tok]
	if !ok {
		return false
	}
	now := b.cfg.Now()
	if t := b.cfg.SessionTimeout; t > 0 && now.Sub(s.used) > t {
		b.dropSession(s)
		return false
	}
	s.used = now
	return true
}

// dropSession deletes a session and its resource. b.mu held.
func (b *BMC) dropSession(s *session) {
	delete(b.sessions, s.token)
	b.put(sessionsPath+"/"+s.id, nil)
	b.syncSessions()
}

// checkPassword reports whether user exists with password p. b.mu held.
func (b *BMC) checkPassword(user, p string) bool {
	want, ok := b.creds[user]
	return ok && subtle.ConstantTimeCompare([]byte(want), []byte(p)) == 1
}

// login creates a session: 201, X-Auth-Token, Location and the Session body.
func (b *BMC) login(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, msgMalformed(err))
		return
	}
	user, _ := body["UserName"].(string)
	pass, _ := body["Password"].(string)
	if _, ok := body["UserName"]; !ok {
		writeError(w, http.StatusBadRequest, msgMissingParam("UserName", "Session creation"))
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cfg.Username != "" && !b.checkLogin(user, pass) {
		writeError(w, http.StatusUnauthorized, msgUnauthorized())
		return
	}
	if lim := b.cfg.MaxSessions; lim > 0 && len(b.sessions) >= lim {
		// As iDRAC answers (RAC0218): 503, no Retry-After, since only a
		// logout or an expiring session frees one.
		writeError(w, http.StatusServiceUnavailable, msgSessionLimit(lim))
		return
	}
	b.nextSess++
	s := &session{id: fmt.Sprintf("%d", b.nextSess), token: newToken(), user: user, used: b.cfg.Now()}
	b.sessions[s.token] = s
	loc := sessionsPath + "/" + s.id
	doc := map[string]any{
		"@odata.id":   loc,
		"@odata.type": "#Session.v1_3_0.Session",
		"Id":          s.id,
		"Name":        "User Session",
		"UserName":    user,
	}
	b.put(loc, doc)
	b.syncSessions()
	out, _ := encodeDoc(doc)
	w.Header().Set("X-Auth-Token", s.token)
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusCreated, out, b.etag(loc))
}

// logout deletes the session at p.
func (b *BMC) logout(w http.ResponseWriter, p string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.sessions {
		if sessionsPath+"/"+s.id == p {
			b.dropSession(s)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, msgMissing(p))
}

// syncSessions rewrites the Sessions collection from the open sessions.
func (b *BMC) syncSessions() {
	coll, ok := b.mutable(sessionsPath)
	if !ok {
		return
	}
	ids := make([]string, 0, len(b.sessions))
	for _, s := range b.sessions {
		ids = append(ids, s.id)
	}
	sortNumeric(ids)
	ms := make([]any, 0, len(ids))
	for _, id := range ids {
		ms = append(ms, map[string]any{"@odata.id": sessionsPath + "/" + id})
	}
	coll["Members"] = ms
	coll["Members@odata.count"] = json.Number(fmt.Sprint(len(ms)))
	b.touch(sessionsPath)
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// linkAccount makes the enforced user an account of the mockup, so that
// rotating its password through AccountService works: an account with that
// UserName is used as is; otherwise the first Administrator account (else
// the first account) is renamed to it.
func (b *BMC) linkAccount(user string) {
	accts := b.tree.accounts
	pick := ""
	for _, p := range accts {
		doc, _ := b.peek(p)
		if doc["UserName"] == user {
			return
		}
		if pick == "" && doc["RoleId"] == "Administrator" {
			pick = p
		}
	}
	if pick == "" && len(accts) > 0 {
		pick = accts[0]
	}
	if pick == "" {
		return
	}
	doc, _ := b.mutable(pick)
	doc["UserName"] = user
	b.touch(pick)
}

// patchAccount changes an account: Password (the new one works at once and
// the old one stops working; open sessions stay open, as on most BMCs; the
// run of failed logins is kept), UserName, Enabled, RoleId, Locked (false
// only: an administrator ends a lockout; only the service locks) and the
// other writable ManagerAccount properties.
func (b *BMC) patchAccount(p string, body map[string]any) (int, *message) {
	for k, v := range body {
		switch k {
		case "Password", "UserName", "RoleId":
			if _, ok := v.(string); !ok {
				return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(v), k))
			}
		case "Enabled", "Locked", "PasswordChangeRequired":
			if _, ok := v.(bool); !ok {
				return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(v), k))
			}
			if k == "Locked" && v == true {
				return http.StatusBadRequest, ptr(msgValueNotInList("true", k, []string{"false"}))
			}
		case "AccountExpiration", "AccountTypes", "EmailAddress", "OEMAccountTypes", "PasswordExpiration",
			"PhoneNumber", "StrictAccountTypes", "OneTimePasscodeDeliveryAddress":
			// Writable in ManagerAccount; stored as given.
		default:
			if strings.HasPrefix(k, "@") {
				continue
			}
			return http.StatusBadRequest, ptr(msgPropertyNotWritable(k))
		}
	}
	if np, ok := body["Password"].(string); ok {
		if m := b.checkPasswordLength(np); m != nil {
			return http.StatusBadRequest, m
		}
	}
	doc, _ := b.mutable(p)
	old, _ := doc["UserName"].(string)
	if body["Locked"] == false {
		b.unlock(old)
	}
	pass, hadPass := b.creds[old]
	if u, ok := body["UserName"].(string); ok && u != old {
		delete(b.creds, old)
		if hadPass {
			b.creds[u] = pass
		}
		if f, ok := b.fails[old]; ok {
			delete(b.fails, old)
			b.fails[u] = f
		}
		doc["UserName"] = u
		old = u
	}
	if np, ok := body["Password"].(string); ok {
		b.creds[old] = np
	}
	for k, v := range body {
		if k != "Password" && k != "UserName" && !strings.HasPrefix(k, "@") {
			doc[k] = v
		}
	}
	if doc["Enabled"] == false {
		delete(b.creds, old)
	}
	b.touch(p)
	return 0, nil
}

// sortNumeric sorts decimal strings by value.
func sortNumeric(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && (len(s[j]) < len(s[j-1]) || len(s[j]) == len(s[j-1]) && s[j] < s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
