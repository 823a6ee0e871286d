package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// Secrets lists the sealed secrets (never their values).
func (c *Client) Secrets(ctx context.Context) ([]wire.Secret, error) {
	var out []wire.Secret
	_, err := c.do(ctx, http.MethodGet, "/api/v1/secrets", nil, &out)
	return out, err
}

// SetSecret seals value under name on the server; endpoints, when given,
// bind it to exactly those BMC endpoints.
func (c *Client) SetSecret(ctx context.Context, name, value string, endpoints ...string) error {
	_, err := c.do(ctx, http.MethodPut, "/api/v1/secrets/"+url.PathEscape(name), wire.SecretRequest{Value: value, Endpoints: endpoints}, nil)
	return err
}

// AllowSecret lets the secret name also go to the BMC endpoint.
func (c *Client) AllowSecret(ctx context.Context, name, endpoint string) error {
	_, err := c.do(ctx, http.MethodPost, "/api/v1/secrets/"+url.PathEscape(name)+"/endpoints", wire.SecretAllow{Endpoint: endpoint}, nil)
	return err
}

// DeleteSecret deletes a secret no machine uses.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/v1/secrets/"+url.PathEscape(name), nil, nil)
	return err
}

// RotateSecretKey re-seals every secret under a fresh key.
func (c *Client) RotateSecretKey(ctx context.Context) (*wire.KeyRotation, error) {
	var out wire.KeyRotation
	_, err := c.do(ctx, http.MethodPost, "/api/v1/secrets/rotate-key", struct{}{}, &out)
	return &out, err
}

// RotateBMC gives the BMC accounts of the request's machines new
// passwords; the answer holds each machine's outcome.
func (c *Client) RotateBMC(ctx context.Context, req wire.BMCRotateRequest) ([]wire.BMCRotation, error) {
	var out []wire.BMCRotation
	_, err := c.do(ctx, http.MethodPost, "/api/v1/bmc/rotate", req, &out)
	return out, err
}

// Backup streams a consistent copy of the server's database into w and
// returns the ID of the secret key its sealed secrets need (the key is
// never in a backup) and the bytes written. A copy cut short is an error.
func (c *Client) Backup(ctx context.Context, w io.Writer) (string, int64, error) {
	const path = "/api/v1/backup"
	resp, err := c.send(ctx, http.MethodPost, path, nil, struct{}{})
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	c.checkVersion(resp.Header.Get(wire.VersionHeader))
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return "", 0, &Error{Server: c.base, Method: http.MethodPost, Path: path, Status: resp.StatusCode, Message: message(data)}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return "", n, &Error{Server: c.base, Method: http.MethodPost, Path: path, Status: resp.StatusCode,
			Message: fmt.Sprintf("the copy was cut short after %d bytes: %v", n, err)}
	}
	return resp.Header.Get(wire.BackupKeyHeader), n, nil
}
