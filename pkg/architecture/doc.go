// Package architecture holds no code: its test holds the house to the
// rules of its rooms (see README.md, "Design notes"), read from the code
// itself with `go list` and the type checker:
//
//   - The CLI (cmd/ingot) and the lab (pkg/lab) are clients of a running
//     server: they import neither the engine nor a store backend (offline
//     admin opens stores through the contract, pkg/store, and the
//     registry, pkg/store/backends).
//   - API handlers (pkg/apiserver) call the core (pkg/fleet, pkg/engine)
//     and never import the store; the API client (pkg/client) speaks only
//     the wire types.
//   - pkg/fleet is the one writer of machine records: no other package
//     calls the store's CreateMachine, ChangeMachine, DeleteMachine,
//     PutInventory or AppendEvent.
package architecture
