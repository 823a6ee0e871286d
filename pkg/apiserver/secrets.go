package apiserver

import (
	"context"
	"net/http"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request, _ principal) error {
	infos, err := s.fleet.Secrets(r.Context())
	if err != nil {
		return err
	}
	out := make([]wire.Secret, 0, len(infos))
	for _, in := range infos {
		sec := wire.Secret{Name: in.Name, KeyID: in.KeyID, Created: in.Created, Updated: in.Updated, UsedBy: in.UsedBy,
			Endpoints: []wire.SecretBinding{}}
		for _, b := range in.Endpoints {
			sec.Endpoints = append(sec.Endpoints, wire.SecretBinding(b))
		}
		out = append(out, sec)
	}
	writeJSON(w, 200, out)
	return nil
}

func (s *Server) putSecret(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.SecretRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	set := s.fleet.SetSecret
	if len(req.Endpoints) > 0 {
		set = func(ctx context.Context, name string, value []byte, actor string) error {
			return s.fleet.SetSecretBound(ctx, name, value, req.Endpoints, actor)
		}
	}
	if err := set(r.Context(), r.PathValue("name"), []byte(req.Value), actor(p)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// postSecretEndpoint lets a secret also go to another BMC endpoint.
func (s *Server) postSecretEndpoint(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.SecretAllow
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := s.fleet.AllowSecret(r.Context(), r.PathValue("name"), req.Endpoint, actor(p)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request, p principal) error {
	if err := s.fleet.DeleteSecret(r.Context(), r.PathValue("name"), actor(p)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) postRotateKey(w http.ResponseWriter, r *http.Request, p principal) error {
	id, n, err := s.fleet.RotateSecretKey(r.Context(), actor(p))
	if err != nil {
		return err
	}
	writeJSON(w, 200, wire.KeyRotation{KeyID: id, Resealed: n})
	return nil
}

// postBMCRotate rotates BMC passwords one machine after another and
// answers each machine's outcome: for several, 200 with each outcome (the
// body says which failed); for one named machine its refusal or failure is
// the status.
func (s *Server) postBMCRotate(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.BMCRotateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	ids := req.Machines
	if len(ids) == 0 {
		var err error
		if ids, err = s.fleet.RotationTargets(r.Context(), req.Recipe, req.All); err != nil {
			return err
		}
	}
	if len(req.Machines) == 1 {
		// One named machine: its refusal or failure is the answer's status.
		rot, err := s.fleet.RotateBMC(r.Context(), ids[0], actor(p))
		if err != nil {
			return err
		}
		writeJSON(w, 200, []wire.BMCRotation{wire.BMCRotation(rot)})
		return nil
	}
	out := []wire.BMCRotation{}
	for _, rot := range s.fleet.RotateBMCs(r.Context(), ids, actor(p)) {
		out = append(out, wire.BMCRotation(rot))
	}
	writeJSON(w, 200, out)
	return nil
}

// postBackup streams a consistent copy of the store (POST, so read-only
// tokens cannot take one: it holds token hashes and sealed secrets). The
// secret key the copy needs is named in a header; it is never sent.
func (s *Server) postBackup(w http.ResponseWriter, r *http.Request, p principal) error {
	// A large store takes longer than the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(30 * time.Minute))
	started := false
	n, err := s.fleet.Backup(r.Context(), w, func(keyID string) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set(wire.BackupKeyHeader, keyID)
		w.Header().Set("Content-Disposition", `attachment; filename="ingot-backup.db"`)
		started = true
	})
	if err != nil && started {
		// Part of the body may be out: the status is sent; end the answer
		// short so the client sees a truncated copy, never a whole-looking one.
		s.log.Error("backup failed while sending", "bytes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		return err
	}
	s.log.Info("backup taken", "bytes", n, "actor", actor(p))
	return nil
}
