package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/fathom-agents/fathom/tools"
)

// Approval is the approval section: the tools whose calls wait for a human's decision
// (approve, edit or reject) before they run.
//
//	approval:
//	  tools: [code_execute, orders__cancel_order]
type Approval struct {
	// Tools are the tool names, in file order.
	Tools []string
	// Lines are where each of Tools is written (ToolError places an unknown one).
	Lines []int
}

// parseApproval reads the approval section.
func parseApproval(p *parser, f *File, key string, _, v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	return p.mapping(v, key, func(k string, kn, vn *yaml.Node) error {
		path := join(key, k)
		if k != "tools" {
			return p.err(kn, path, "unknown key (want tools)")
		}
		if vn.Kind != yaml.SequenceNode {
			return p.err(vn, path, "must be a list of tool names ([code_execute, orders__cancel_order])")
		}
		seen := map[string]int{}
		for i, item := range vn.Content {
			ipath := fmt.Sprintf("%s[%d]", path, i)
			name, err := p.str(item, ipath)
			if err != nil {
				return err
			}
			if !tools.ValidName(name) {
				return p.err(item, ipath, fmt.Sprintf("%q is not a valid tool name", name))
			}
			if first, dup := seen[name]; dup {
				return p.err(item, ipath, fmt.Sprintf("duplicate tool %q (first at line %d)", name, first))
			}
			seen[name] = item.Line
			f.Approval.Tools = append(f.Approval.Tools, name)
			f.Approval.Lines = append(f.Approval.Lines, item.Line)
		}
		return nil
	})
}

// ToolError places an approval tool the node does not have in the file: "FILE:LINE:
// approval.tools[i]: msg". It returns nil when tool is not in the section.
func (f *File) ToolError(tool, msg string) error {
	for i, name := range f.Approval.Tools {
		if name == tool {
			return &Error{File: f.Path, Line: f.Approval.Lines[i], Key: fmt.Sprintf("approval.tools[%d]", i), Msg: msg}
		}
	}
	return nil
}
