package serve

import (
	"context"
)

// Run is `ingot serve`: it builds every part of the server from cfg (the
// store by its URL through the backend registry, the recipes, the content
// store, the fleet, machine credentials, the engine, telemetry, the API,
// virtual media) and serves them with the boot listeners under one
// supervisor until ctx ends. It is the one place ingot is put together.
func Run(ctx context.Context, cfg Config, o Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	c, err := Build(ctx, cfg, o)
	if err != nil {
		return err
	}
	defer c.Close()
	d, err := c.deps()
	if err != nil {
		return err
	}
	return Serve(ctx, cfg, d)
}
