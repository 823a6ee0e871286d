package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// Tokens lists the operator tokens.
func (c *Client) Tokens(ctx context.Context) ([]wire.Token, error) {
	var out []wire.Token
	_, err := c.do(ctx, http.MethodGet, "/api/v1/tokens", nil, &out)
	return out, err
}

// CreateToken makes an operator token; its secret is in the answer only.
func (c *Client) CreateToken(ctx context.Context, name, scope string, ttl time.Duration) (*wire.TokenCreated, error) {
	req := wire.TokenRequest{Name: name, Scope: scope}
	if ttl > 0 {
		req.TTL = ttl.String()
	}
	var out wire.TokenCreated
	_, err := c.do(ctx, http.MethodPost, "/api/v1/tokens", req, &out)
	return &out, err
}

// RevokeToken deletes a token; it stops working at once.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/v1/tokens/"+url.PathEscape(id), nil, nil)
	return err
}

// Images lists the server's stored images.
func (c *Client) Images(ctx context.Context) ([]wire.Image, error) {
	var out []wire.Image
	_, err := c.do(ctx, http.MethodGet, "/api/v1/images", nil, &out)
	return out, err
}

// Version asks the server's version.
func (c *Client) Version(ctx context.Context) (string, error) {
	var v wire.Version
	_, err := c.do(ctx, http.MethodGet, "/api/v1/version", nil, &v)
	return v.Version, err
}

// Recipes lists the recipe names the server knows.
func (c *Client) Recipes(ctx context.Context) ([]string, error) {
	var out []string
	_, err := c.do(ctx, http.MethodGet, "/api/v1/recipes", nil, &out)
	return out, err
}
