package config

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/fathom-agents/fathom/tools"
)

// Approval is the approval section: the tools whose calls wait for a human's decision
// (approve, edit or reject) before they run. An entry is a tool name, or a mapping
// with the name and the decisions a human may take on its calls (allowed_decisions;
// default all three):
//
//	approval:
//	  tools:
//	    - code_execute
//	    - name: orders__cancel_order
//	      allowed_decisions: [approve, reject]
type Approval struct {
	// Tools are the tool names, in file order.
	Tools []string
	// Lines are where each of Tools is written (ToolError places an unknown one).
	Lines []int
	// Decisions are the allowed_decisions of the entries that give them, by tool.
	Decisions map[string][]string
}

// approvalDecisions are the decisions allowed_decisions may list.
var approvalDecisions = []string{"approve", "edit", "reject"}

func init() {
	register("approval", parseApproval)
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
			name, decisions, err := p.approvalTool(item, ipath)
			if err != nil {
				return err
			}
			if first, dup := seen[name]; dup {
				return p.err(item, ipath, fmt.Sprintf("duplicate tool %q (first at line %d)", name, first))
			}
			seen[name] = item.Line
			f.Approval.Tools = append(f.Approval.Tools, name)
			f.Approval.Lines = append(f.Approval.Lines, item.Line)
			if decisions != nil {
				if f.Approval.Decisions == nil {
					f.Approval.Decisions = map[string][]string{}
				}
				f.Approval.Decisions[name] = decisions
			}
		}
		return nil
	})
}

// approvalTool reads one entry of approval.tools: a tool name, or {name,
// allowed_decisions} (decisions nil when not given).
func (p *parser) approvalTool(item *yaml.Node, path string) (name string, decisions []string, err error) {
	if item.Kind != yaml.MappingNode {
		if name, err = p.str(item, path); err != nil {
			return "", nil, err
		}
		if !tools.ValidName(name) {
			return "", nil, p.err(item, path, fmt.Sprintf("%q is not a valid tool name", name))
		}
		return name, nil, nil
	}
	err = p.mapping(item, path, func(k string, kn, vn *yaml.Node) error {
		kpath := join(path, k)
		switch k {
		case "name":
			var err error
			if name, err = p.str(vn, kpath); err != nil {
				return err
			}
			if !tools.ValidName(name) {
				return p.err(vn, kpath, fmt.Sprintf("%q is not a valid tool name", name))
			}
		case "allowed_decisions":
			list, err := p.strList(vn, kpath)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				return p.err(vn, kpath, "allows no decision: list some of approve, edit, reject")
			}
			for i, d := range list {
				if !slices.Contains(approvalDecisions, d) {
					return p.err(vn.Content[i], fmt.Sprintf("%s[%d]", kpath, i), fmt.Sprintf("%q is not a decision (want approve, edit or reject)", d))
				}
				if slices.Contains(list[:i], d) {
					return p.err(vn.Content[i], fmt.Sprintf("%s[%d]", kpath, i), fmt.Sprintf("duplicate decision %q", d))
				}
			}
			decisions = list
		default:
			return p.err(kn, kpath, "unknown key (want allowed_decisions, name)")
		}
		return nil
	})
	if err == nil && name == "" {
		err = p.err(item, path+".name", "required: the tool's name")
	}
	return name, decisions, err
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
