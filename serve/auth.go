package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// CookieName is the browser session's cookie.
const CookieName = "deputy_session"

// auth lets a request through with the token as a bearer, or with a live
// session cookie; anything else is 401. The token is compared in constant
// time, and neither it nor the cookie is ever logged or echoed.
//
// The check comes before anything reads the body, and a refusal does not
// read it either (refuseUnread): an unauthenticated request costs the
// server its headers and nothing more. Behind Harden, the check is the
// one its Authenticate made (carried in the context), not a second one.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := r.Context().Value(credKey{s}).(cred)
		if !ok {
			c = s.credentials(r)
		}
		switch c {
		case credOK:
			next.ServeHTTP(w, r)
		case credWrong:
			refuseUnread(w, r)
			writeError(w, http.StatusUnauthorized, "unauthorized", "wrong token")
		default:
			refuseUnread(w, r)
			w.Header().Set("WWW-Authenticate", `Bearer realm="deputy"`)
			writeError(w, http.StatusUnauthorized, "unauthorized",
				"this needs the server's token: Authorization: Bearer TOKEN, or sign in (POST /api/session)")
		}
	})
}

type cred int

const (
	credNone cred = iota
	credWrong
	credOK
)

// credentials says what a request carries: the token as a bearer, a live
// session cookie, a wrong one of either, or nothing.
func (s *Server) credentials(r *http.Request) cred {
	if h := r.Header.Get("Authorization"); h != "" {
		// The scheme is case-insensitive (RFC 9110, 11.1).
		scheme, bearer, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") && s.tokenOK(strings.TrimSpace(bearer)) {
			return credOK
		}
		return credWrong
	}
	if c, err := r.Cookie(CookieName); err == nil && s.sessions.valid(c.Value) {
		return credOK
	}
	return credNone
}

// credKey carries in a request's context what s.credentials found, for
// auth: the token's digest and the session lookup are done once per
// request. The key is the server's own, so another server's verdict (or a
// Limits.Authenticate of someone else's) is never taken for it.
type credKey struct{ s *Server }

// authenticate is Limits.Authenticate for the server's connections.
func (s *Server) authenticate(r *http.Request) (*http.Request, bool) {
	c := s.credentials(r)
	return r.WithContext(context.WithValue(r.Context(), credKey{s}, c)), c == credOK
}

// refuseUnread prepares an answer that leaves the request's body unread.
// Without it net/http, to reuse the connection, reads up to 256 KiB of
// the body after the answer, at whatever pace the sender trickles it (one
// byte every 2 s held a descriptor for days). Instead the connection
// closes after the answer (Connection: close) and the read that would
// drain it fails at once (a deadline in the past; bytes already buffered
// are still consumed, so a client that sent its small body along with its
// headers sees a clean close).
func refuseUnread(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// tokenOK compares digests, so the comparison takes the same time
// whatever the length of the guess.
func (s *Server) tokenOK(got string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.o.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// signIn exchanges the token for a session cookie (the dashboard's one
// use of the token: EventSource cannot send headers, and a token in a URL
// ends up in logs and history).
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Token string `json:"token"`
	}
	if !decodeMax(w, r, &in, maxSignInBody) {
		return
	}
	if !s.tokenOK(in.Token) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "wrong token")
		return
	}
	id, exp := s.sessions.open()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", Expires: exp, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	writeJSON(w, http.StatusOK, map[string]any{"signed_in": true, "expires": exp})
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil {
		s.sessions.close(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	writeJSON(w, http.StatusOK, map[string]bool{"signed_in": false})
}

// secure reports whether the browser reached deputy over TLS: its own,
// or a TLS proxy's in front of it (X-Forwarded-Proto). The cookie is then
// Secure. Trusting the header costs nothing: a forged https only keeps the
// cookie off plain http, where the proxy's users do not go anyway.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// sessions are the browsers signed in, in memory: a restart signs
// everyone out, and signing out ends a session for good (a signed,
// stateless cookie could not be revoked). Only digests of the session ids
// are kept.
type sessions struct {
	clock clock.Clock
	ttl   time.Duration
	mu    sync.Mutex
	m     map[[32]byte]time.Time
}

func newSessions(c clock.Clock, ttl time.Duration) *sessions {
	return &sessions{clock: c, ttl: ttl, m: map[[32]byte]time.Time{}}
}

func (ss *sessions) open() (string, time.Time) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	id := base64.RawURLEncoding.EncodeToString(b[:])
	exp := ss.clock.Now().Add(ss.ttl)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.clock.Now()
	for k, e := range ss.m { // expired sessions go as new ones come
		if !now.Before(e) {
			delete(ss.m, k)
		}
	}
	ss.m[sha256.Sum256([]byte(id))] = exp
	return id, exp
}

func (ss *sessions) valid(id string) bool {
	k := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	exp, ok := ss.m[k]
	if ok && !ss.clock.Now().Before(exp) {
		delete(ss.m, k)
		return false
	}
	return ok
}

func (ss *sessions) close(id string) {
	ss.mu.Lock()
	delete(ss.m, sha256.Sum256([]byte(id)))
	ss.mu.Unlock()
}

// LoadToken reads the server's token from path, or creates it there (32
// random bytes, base64url, mode 0600, in a 0700 directory made if needed)
// and says so with created. A token file that others can read is refused:
// whoever reads it controls every agent.
func LoadToken(path string) (token string, created bool, err error) {
	data, err := os.ReadFile(path)
	if err == nil {
		fi, err := os.Stat(path)
		if err != nil {
			return "", false, err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", false, fmt.Errorf("token file %s has mode %#o: others can read it (chmod 600 %s)", path, fi.Mode().Perm(), path)
		}
		t := strings.TrimSpace(string(data))
		if len(t) < 16 {
			return "", false, fmt.Errorf("token file %s: the token is shorter than 16 characters", path)
		}
		return t, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read token file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("token file: %w", err)
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	t := base64.RawURLEncoding.EncodeToString(b[:])
	// O_EXCL: two servers starting at once cannot both write a token.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadToken(path)
	} else if err != nil {
		return "", false, fmt.Errorf("create token file: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", false, fmt.Errorf("write token file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("write token file: %w", err)
	}
	return t, true, nil
}
