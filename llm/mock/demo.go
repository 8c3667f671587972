package mock

// The demo script's building blocks. Rules key on the role marker on the first line of
// every Fathom prompt (prompts/*.md.tmpl) and, within a sub-agent's turn-by-turn loop,
// on the last tool result: each answer depends only on the request, so any number of
// sessions and sub-agents can share the server.
const (
	fence = "```"
	// ws is the session's workspace prefix ("s-1/"), from the prompt's "Workspace:" line.
	ws = `(find "Workspace: (\\S+)" .System)`
	// artifactPath matches an artifact path with its workspace prefix.
	artifactPath = `[\\w.:-]+/(?:research|code|drafts|data|logs)/[\\w.-]*\\w`
	// draftPath matches a draft's path.
	draftPath = `[\\w.:-]+/drafts/[\\w.-]*\\w`
	// demoCode is the program the coder runs and stores.
	demoCode = `words = \"events fall like rain\".split()\nprint(len(words), \"words,\", sum(map(len, words)), \"letters\")\n`
)

// handoff is a sub-agent's final answer: a sentence, then the hand-off JSON in a fence.
func handoff(sentence, json string) string {
	return "(demo model) " + sentence + "\n\n" + fence + "json\n" + json + "\n" + fence + "\n"
}

// failedHandoff answers a sub-agent whose artifact call failed: status partial, the
// tool's error as the blocker.
func failedHandoff(typeSpecific string) string {
	return handoff("The work is done but could not be stored.",
		`{"status":"partial","summary":"The demo work is done, but storing it as an artifact failed.","recommendations":["Configure the artifact store and run the step again"],`+
			`"blockers":[{{json .Tool}}],"confidence":0.3,`+typeSpecific+`}`)
}

// DemoScript is the built-in demo model (`fathom run` without an API key). For any goal:
//
//   - orchestrator, phase plan: research s1 → code s2 and write s3 (both after s1, so
//     they run in parallel) → review s4 (after s2 and s3);
//   - researcher: write_todos, then write_artifact research/notes.md, then its hand-off;
//   - coder: code_execute (a short python program), then write_artifact code/demo.py,
//     then its hand-off (tests_status passing when the program ran);
//   - writer: write_artifact drafts/draft.md, then its hand-off;
//   - reviewer: read_artifact of the draft named in its task, then a hand-off with
//     verdict approve;
//   - orchestrator, phase synthesize: a closing summary citing every artifact path in
//     its input;
//   - orchestrator, phase replan (a step failed for good; the demo's sub-agents never
//     fail, but a script built on it may): one write step, depending on nothing, that
//     delivers what it can without the failed step's work;
//   - executor (steps the orchestrator runs itself): research calls write_todos then
//     writes notes, write drafts a haiku, review counts the draft's words with
//     code_execute, anything else completes;
//   - orchestrator, a follow-up message to a completed session (the FATHOM-FOLLOW-UP
//     section of its prompt): a direct answer quoting the message;
//   - summarizer: a fixed summary.
//
// Hand-offs are a sentence and one JSON object in a ```json fence; when an artifact call
// fails the sub-agent hands off with status partial and the error as a blocker.
func DemoScript() Script {
	return Script{
		Rules: concat(
			researcherRules(), coderRules(), writerRules(), reviewerRules(),
			orchestratorRules(), executorRules(),
			[]Rule{{SystemMatch: "FATHOM-ROLE: summarizer", Response: "(demo model) Summary: the agent worked through its plan step by step; " +
				"a real model would keep the goal, facts and decisions here."}},
		),
		Default: "(demo model) I have no scripted answer for that.",
	}
}

func concat(groups ...[]Rule) []Rule {
	var out []Rule
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func researcherRules() []Rule {
	const role = "FATHOM-ROLE: researcher"
	const specific = `"sources":[],"key_findings":["The goal is understood; a real model would list verified facts here"],"knowledge_gaps":["The demo model does not search the web"]`
	return []Rule{
		{SystemMatch: role, ToolMatch: "Tool `write_artifact` failed", Response: failedHandoff(specific)},
		// After the todo list: the notes.
		{SystemMatch: role, ToolMatch: "Updated todo list|Tool `write_todos` failed", ToolCalls: []ToolCallRule{{Name: "write_artifact", Arguments: `{"type":"research","filename":"notes.md","content":` +
			`{{json (printf "# Research notes\n\nQuestion: %s\n\n## Key findings\n- (demo model) A real researcher would search the web and record facts with their sources here.\n\n## Sources\n- None: the demo model does not search.\n" .Goal)}}}`}}},
		// After the notes: the hand-off.
		{SystemMatch: role, ToolMatch: `[\s\S]`, Response: handoff("Research notes are written.",
			`{"status":"completed","summary":{{json (printf "Collected notes for: %s. They are in %sresearch/notes.md." .Goal `+ws+`)}},`+
				`"recommendations":["Build the deliverable on the notes"],"blockers":[],"confidence":0.6,`+specific+`}`)},
		// First turn: plan with a todo list.
		{SystemMatch: role, ToolCalls: []ToolCallRule{{Name: "write_todos", Arguments: `{"todos":[` +
			`{"content":"Work out what the goal asks for","status":"in_progress"},` +
			`{"content":"Collect the facts the deliverable needs","status":"pending"},` +
			`{"content":"Write the notes as research/notes.md","status":"pending"}]}`}}},
	}
}

func coderRules() []Rule {
	const role = "FATHOM-ROLE: coder"
	specific := `"files_created":[{{json (printf "%scode/demo.py" ` + ws + `)}}],` +
		`"tests_status":"{{if find "\"stdout\"" .Input}}passing{{else}}none{{end}}","impl_notes":"Run with python3 demo.py: it prints the word and letter counts of a line of the haiku."`
	return []Rule{
		{SystemMatch: role, ToolMatch: "Tool `write_artifact` failed", Response: failedHandoff(specific)},
		// After the run (or its failure, e.g. no sandbox): store the program.
		{SystemMatch: role, ToolMatch: `"stdout"|Tool .code_execute. failed`, ToolCalls: []ToolCallRule{{Name: "write_artifact",
			Arguments: `{"type":"code","filename":"demo.py","content":"` + demoCode + `"}`}}},
		{SystemMatch: role, ToolMatch: `[\s\S]`, Response: handoff("The program is written{{if find \"\\\"stdout\\\"\" .Input}} and ran in the sandbox{{end}}.",
			`{"status":"completed","summary":{{json (printf "Wrote a small program for: %s. It is in %scode/demo.py." .Goal `+ws+`)}},`+
				`"recommendations":[],"blockers":[],"confidence":0.7,`+specific+`}`)},
		// First turn: run the program.
		{SystemMatch: role, ToolCalls: []ToolCallRule{{Name: "code_execute", Arguments: `{"language":"python","code":"` + demoCode + `"}`}}},
	}
}

func writerRules() []Rule {
	const role = "FATHOM-ROLE: writer"
	const specific = `"document_type":"draft","word_count":14,"sections":["Draft"]`
	return []Rule{
		{SystemMatch: role, ToolMatch: "Tool `write_artifact` failed", Response: failedHandoff(specific)},
		{SystemMatch: role, ToolMatch: `[\s\S]`, Response: handoff("The draft is written.",
			`{"status":"completed","summary":{{json (printf "Drafted the deliverable for: %s. It is in %sdrafts/draft.md." .Goal `+ws+`)}},`+
				`"recommendations":["Review the draft against the goal"],"blockers":[],"confidence":0.7,`+specific+`}`)},
		{SystemMatch: role, ToolCalls: []ToolCallRule{{Name: "write_artifact", Arguments: `{"type":"drafts","filename":"draft.md","content":` +
			`{{json (printf "# %s\n\nEvents fall like rain,\nthe journal keeps every drop:\nstate is just their sum.\n" .Goal)}}}`}}},
	}
}

func reviewerRules() []Rule {
	const role = "FATHOM-ROLE: reviewer"
	return []Rule{
		{SystemMatch: role, ToolMatch: "Tool `read_artifact` failed", Response: handoff("The draft could not be read.",
			`{"status":"partial","summary":"The draft could not be read, so it was not reviewed.","recommendations":["Check that the writer stored the draft"],`+
				`"blockers":[{{json .Tool}}],"confidence":0.2,"verdict":"revise","issues":["The draft could not be read"]}`)},
		{SystemMatch: role, ToolMatch: `[\s\S]`, Response: handoff("The draft meets the goal.",
			`{"status":"completed","summary":{{json (printf "Reviewed %s against the goal: approved." (or (find "`+draftPath+`" .Input) "the draft"))}},`+
				`"recommendations":[],"blockers":[],"confidence":0.8,"verdict":"approve","issues":[]}`)},
		{SystemMatch: role, ToolCalls: []ToolCallRule{{Name: "read_artifact",
			Arguments: `{"path":{{json (or (find "` + draftPath + `" .Input) (printf "%sdrafts/draft.md" ` + ws + `))}}}`}}},
	}
}

func orchestratorRules() []Rule {
	return []Rule{
		{SystemMatch: `FATHOM-ROLE: orchestrator\s+FATHOM-PHASE: synthesize`, Response: "(demo model) Summary for: {{.Goal}}\n\n" +
			"The plan ran to the end: a researcher gathered notes, a coder wrote and ran a small program, " +
			"a writer drafted the deliverable and a reviewer checked it.\n\nArtifacts:\n" +
			`{{range findAll "` + artifactPath + `" .Input}}- ` + "`{{.}}`" + "\n{{else}}- none were reported in the hand-offs\n{{end}}" +
			"\nA real model would answer the goal here from the hand-offs' findings.\n"},
		{SystemMatch: `FATHOM-ROLE: orchestrator\s+FATHOM-PHASE: replan`, Response: `{"steps":[` +
			`{"id":"fallback-{{.N}}","type":"write","description":{{json (printf "Write what can be delivered for: %s without the failed step's work, and say what is missing. Save it as drafts/draft.md." .Goal)}},"dependencies":[]}]}`},
		// A follow-up message to a completed session: answered directly (the prompt's
		// FATHOM-FOLLOW-UP section), quoting the message.
		{SystemMatch: `FATHOM-ROLE: orchestrator[\s\S]*FATHOM-FOLLOW-UP`, Response: "(demo model) On your follow-up ({{.User}}): " +
			"a real model would answer it here from the session's history, or plan new steps for it."},
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[` +
			`{"id":"s1","type":"research","description":{{json (printf "Research what is needed to: %s. Save the notes as research/notes.md." .Goal)}},"dependencies":[]},` +
			`{"id":"s2","type":"code","description":{{json (printf "Write and run a small program that supports: %s. Save it under code/." .Goal)}},"dependencies":["s1"]},` +
			`{"id":"s3","type":"write","description":{{json (printf "Write the deliverable for: %s. Save it as drafts/draft.md." .Goal)}},"dependencies":["s1"]},` +
			`{"id":"s4","type":"review","description":"Review the draft and the program against the goal and list any gaps","dependencies":["s2","s3"]}]}`},
	}
}

// executorRules answer the steps the orchestrator runs itself (the executor prompt).
func executorRules() []Rule {
	return []Rule{
		// The research step shows the LLM↔tool loop: first a write_todos call, then,
		// once its result is in the conversation, the notes.
		{SystemMatch: `FATHOM-ROLE: executor[\s\S]*You are a research agent`, ToolMatch: `(?i)todo`, Response: "(demo model) Notes for: {{.Step}}\n" +
			"- What is asked: {{.Goal}}\n- A real model would gather sources and facts here; the demo model only shows the flow."},
		{SystemMatch: `FATHOM-ROLE: executor[\s\S]*You are a research agent`, ToolCalls: []ToolCallRule{{Name: "write_todos", Arguments: `{"todos":[` +
			`{"content":"Work out what the goal asks for","status":"in_progress"},` +
			`{"content":"Collect the facts the deliverable needs","status":"pending"},` +
			`{"content":"Hand notes to the writer","status":"pending"}]}`}}},
		{SystemMatch: `FATHOM-ROLE: executor[\s\S]*You are a write agent`, Response: "(demo model) Draft for: {{.Goal}}\n\n" +
			"Events fall like rain,\nthe journal keeps every drop:\nstate is just their sum."},
		// The review step runs code: it counts the draft's lines and words in the
		// sandbox (code_execute), then reviews with the result in the conversation.
		// Without a sandbox the tool's error comes back instead and the review says so.
		{SystemMatch: `FATHOM-ROLE: executor[\s\S]*You are a review agent`, ToolMatch: `"stdout"`, Response: "(demo model) Review: " +
			"the draft answers the goal; a sandboxed check counted its lines and words: {{.Tool}}"},
		{SystemMatch: `FATHOM-ROLE: executor[\s\S]*You are a review agent`, ToolMatch: `(?i)error|sandbox`, Response: "(demo model) Review: " +
			"the draft answers the goal (the sandboxed check could not run: {{.Tool}})"},
		{SystemMatch: `FATHOM-ROLE: executor[\s\S]*You are a review agent`, ToolCalls: []ToolCallRule{{Name: "code_execute", Arguments: `{"language":"python",` +
			`"code":"text = \"Events fall like rain\\nthe journal keeps every drop\\nstate is just their sum\"\nprint(len(text.splitlines()), \"lines,\", len(text.split()), \"words\")"}`}}},
		{SystemMatch: "FATHOM-ROLE: executor", Response: "(demo model) Completed: {{.Step}}"},
	}
}
