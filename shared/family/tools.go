package family

import (
	"slices"

	"github.com/botplatform/api/shared/mcptool"
)

// addTools adds a composed family's MCP tools to the Env's. A name is one tool across
// every family: a second one would shadow the first over MCP, so it stops the process as a
// job kind registered twice does.
func (e *Env) addTools(family string, tools []mcptool.Tool) {
	for _, t := range tools {
		if slices.ContainsFunc(e.tools, func(o mcptool.Tool) bool { return o.Name == t.Name }) {
			panic("family: MCP tool declared twice: " + t.Name + " (again by " + family + ")")
		}
		e.tools = append(e.tools, t)
	}
}

// Tools returns the MCP tools of the families composed on the Env, in composition order.
// Compose adds them after building each family, so a family's Routes, which run once every
// family is built (Composed.Mux), see them all: the MCP endpoint registers its route there.
func (e *Env) Tools() []mcptool.Tool { return slices.Clone(e.tools) }

// ToolsOnly is f composed for its MCP tools alone: no routes, jobs, queue handlers or purge
// step. The MCP Lambda composes the families whose tools it serves this way, so that it
// serves POST /mcp and nothing of theirs.
func ToolsOnly(f Family) Family {
	return Family{Name: f.Name, Build: func(env *Env) Parts { return Parts{Tools: f.Build(env).Tools} }}
}
