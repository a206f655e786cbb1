package mount

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// Verify through the control socket: a "verify" request is answered by
// a stream of Responses, each carrying a VerifyMessage (progress, one
// problem), the last one the report (or an Error). The mount verifies its
// own store read-only, beside its writers (see running.verify).

// VerifyMessage is one line of the answer to a "verify" request.
type VerifyMessage struct {
	Progress *objstore.VerifyProgress `json:"progress,omitempty"`
	Problem  *ProblemInfo             `json:"problem,omitempty"`
	Report   *VerifyReport            `json:"report,omitempty"`
}

// ProblemInfo is an objstore.Problem on the wire, with the name of its
// file (File 0: no revision concerned).
type ProblemInfo struct {
	Kind  objstore.ProblemKind `json:"kind"`
	File  index.FileID         `json:"file"`
	Name  string               `json:"name"`
	Rev   index.Rev            `json:"rev"`
	Path  string               `json:"path,omitempty"`
	Error string               `json:"error"`
}

// InfoOf turns a problem of st into its wire form.
func InfoOf(p objstore.Problem, st *objstore.Store) ProblemInfo {
	i := ProblemInfo{Kind: p.Kind, File: p.Rev.File, Rev: p.Rev.Rev, Path: p.Path, Error: p.Err.Error()}
	if i.File != 0 {
		if m, err := st.File(i.File); err == nil {
			i.Name = m.Name
		}
	}
	return i
}

// verifyFunc verifies a mounted store.
type verifyFunc func(ctx context.Context, report func(objstore.Problem), progress func(objstore.VerifyProgress)) (VerifyReport, error)

// verifier is a Controller that answers "verify".
type verifier interface {
	Verify(ctx context.Context, report func(ProblemInfo), progress func(objstore.VerifyProgress)) (VerifyReport, error)
}

var _ verifier = (*snapshotter)(nil)

// Verify verifies the mounted store (running.verify), when the
// snapshotter serves a mount, naming each problem's file.
func (s *snapshotter) Verify(ctx context.Context, report func(ProblemInfo), progress func(objstore.VerifyProgress)) (VerifyReport, error) {
	if s.verify == nil {
		return VerifyReport{}, errors.New("verify is served by a running mount only")
	}
	return s.verify(ctx, func(p objstore.Problem) { report(InfoOf(p, s.st)) }, progress)
}

// progressEvery spaces the progress lines a verify sends.
const progressEvery = 100 * time.Millisecond

// streamVerify answers a verify request on enc; false if the client went
// away.
func (s *controlServer) streamVerify(enc *json.Encoder, v verifier) bool {
	ctx, cancel := context.WithCancel(s.stopCtx)
	defer cancel()
	var sendErr error
	send := func(m VerifyMessage) {
		if m.Problem != nil && ctx.Err() != nil {
			return // a check cut short, not a problem of the store
		}
		if sendErr == nil {
			if sendErr = enc.Encode(Response{Verify: &m}); sendErr != nil {
				cancel() // nobody listens: stop verifying
			}
		}
	}
	var last time.Time
	progress := func(p objstore.VerifyProgress) {
		if time.Since(last) >= progressEvery || p.Done == p.Total {
			last = time.Now()
			send(VerifyMessage{Progress: &p})
		}
	}
	rep, err := v.Verify(ctx, func(i ProblemInfo) { send(VerifyMessage{Problem: &i}) }, progress)
	if err != nil && s.stopCtx.Err() != nil {
		err = errors.New("stopped: the mount is being unmounted")
	}
	if err != nil {
		if sendErr == nil {
			sendErr = enc.Encode(Response{Error: ByteString("verify: " + err.Error())})
		}
		return sendErr == nil
	}
	send(VerifyMessage{Report: &rep})
	return sendErr == nil
}

// VerifyMounted asks the mount of the store in dir to verify it, calling
// fn with every progress and problem message, and returns the report. It
// fails with an error matching ErrNotMounted when no mount listens there.
func VerifyMounted(ctx context.Context, dir string, fn func(VerifyMessage)) (VerifyReport, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", filepath.Join(dir, ControlSocket))
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return VerifyReport{}, fmt.Errorf("%s: %w", dir, ErrNotMounted)
	}
	if err != nil {
		return VerifyReport{}, fmt.Errorf("control socket of %s: %w", dir, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	werr := json.NewEncoder(conn).Encode(Request{Op: "verify"})
	dec := json.NewDecoder(conn)
	for {
		var resp Response
		if err := dec.Decode(&resp); err != nil {
			if ctx.Err() != nil {
				return VerifyReport{}, ctx.Err()
			}
			return VerifyReport{}, fmt.Errorf("control socket of %s: %w", dir, errors.Join(werr, err))
		}
		switch {
		case resp.Error != "":
			if e, ok := errOfCode(resp.Code); ok {
				return VerifyReport{}, fmt.Errorf("%s (%w)", resp.Error, e)
			}
			return VerifyReport{}, errors.New(string(resp.Error))
		case resp.Verify == nil:
			return VerifyReport{}, errEmpty
		case resp.Verify.Report != nil:
			return *resp.Verify.Report, nil
		default:
			fn(*resp.Verify)
		}
	}
}
