package client

import (
	"context"
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

// SetSecret seals value under name on the server.
func (c *Client) SetSecret(ctx context.Context, name, value string) error {
	_, err := c.do(ctx, http.MethodPut, "/api/v1/secrets/"+url.PathEscape(name), wire.SecretRequest{Value: value}, nil)
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
