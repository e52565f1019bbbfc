package family

import (
	"errors"
	"fmt"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/mcptool"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/queue"
)

// Family is one route family: its name (the Lambda that serves it, functions/<name>) and
// how it builds, once per Env, the services behind its parts.
type Family struct {
	Name  string
	Build func(env *Env) Parts
}

// Parts are what a family serves and runs. Every member is optional.
type Parts struct {
	// Routes registers the family's HTTP routes.
	Routes func(mux *httpapi.Mux)
	// Jobs are the background job kinds the family starts, with their steps.
	Jobs map[string]jobs.Step
	// Queue registers the family's handlers of work-queue messages (the conversation
	// runtime's inbound updates, for one): run by the local process's workers and by the
	// jobs Lambda.
	Queue func(mux *queue.Mux)
	// Purge is the step that erases everything the family stores for a deleted bot (payload
	// purge.Payload; the cursor is the family's own). A family that stores data under a
	// bot must declare it: the job purge.Job runs every composed family's step in turn
	// (purge.go), and shared/purge builds one from the family's partitions.
	Purge jobs.Step
	// Erase is the step that erases what the family keeps about one erased subscriber
	// (payload purge.Erasure; the cursor is the family's own): a family that copies a
	// subscriber's personal data, or keeps items by subscriber, must declare it. The job
	// purge.EraseJob, which the subscribers family starts when it erases one, runs every
	// composed family's step in turn (purge.go).
	Erase jobs.Step
	// Tools are the family's MCP tools, declared beside its routes with the same access
	// (shared/mcptool); the MCP endpoint (functions/mcp) serves the tools of every family
	// composed on its Env (Env.Tools).
	Tools []mcptool.Tool
}

// Composed is a set of families built on one Env, each once.
type Composed struct {
	env   *Env
	built []built
}

type built struct {
	name  string
	parts Parts
}

// Compose builds families on env, in order, and adds their job kinds to the kinds env.Jobs
// starts (with purge.Job over every family that purges, and purge.EraseJob over every family
// that erases, where any does) and their MCP tools to env.Tools.
func Compose(env *Env, families ...Family) *Composed {
	c := &Composed{env: env}
	for _, f := range families {
		p := f.Build(env)
		c.built = append(c.built, built{name: f.Name, parts: p})
		for kind, step := range p.Jobs {
			env.registry.Register(kind, step)
		}
		env.addTools(f.Name, p.Tools)
	}
	if list := c.purgers(); len(list) > 0 {
		env.registry.Register(purgeJob, purgeStep(list, env.Log))
	}
	if list := c.erasers(); len(list) > 0 {
		env.registry.Register(purge.EraseJob, eraseStep(list, env.Log))
	}
	return c
}

// Mux returns a router serving the composed families' routes. authn is how requests are
// authenticated: the bearer token locally, the authorizer's context on AWS.
func (c *Composed) Mux(authn httpapi.Authenticator) (*httpapi.Mux, error) {
	e := c.env
	mux, err := httpapi.NewMux(httpapi.Config{Authenticate: authn, Bots: e.Tenancy, Audit: e.Audit, Log: e.Log, Now: e.Now, Requests: e.Requests})
	if err != nil {
		return nil, err
	}
	n := 0
	for _, b := range c.built {
		if b.parts.Routes != nil {
			b.parts.Routes(mux)
			n++
		}
	}
	if n == 0 {
		return nil, errors.New("family: no family with routes to serve")
	}
	return mux, nil
}

// QueueMux returns the handlers of every queue message type: the job steps of the composed
// families and each family's own messages. It needs an Env with a Queue.
func (c *Composed) QueueMux() (*queue.Mux, error) {
	if c.env.runner == nil {
		return nil, fmt.Errorf("family: no queue to run jobs on")
	}
	mux := queue.NewMux()
	c.env.runner.Register(mux)
	for _, b := range c.built {
		if b.parts.Queue != nil {
			b.parts.Queue(mux)
		}
	}
	return mux, nil
}

// PurgeOrder names, in order, the families whose steps erase a deleted bot's data.
func (c *Composed) PurgeOrder() []string {
	var out []string
	for _, p := range c.purgers() {
		out = append(out, p.name)
	}
	return out
}

// Registry returns the job kinds the composed families run (Step Functions tasks run from it).
func (c *Composed) Registry() *jobs.Registry { return c.env.registry }
