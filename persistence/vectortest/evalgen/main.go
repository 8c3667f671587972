// Command evalgen writes the retrieval evaluation set of hybrid retrieval
// (persistence/vectortest/testdata/retrieval-eval.json, read by vectortest.LoadEval):
// sessions of realistic messages from four kinds of work (customer support, an
// incident, debugging code, data analysis), each with facts that carry identifiers
// (order ids, error codes, hosts, files, functions, tables) among filler turns and
// distractors (other identifiers of the same kind), and for each fact three queries
// asked later in the session: by its identifier, by a paraphrase without it (in other
// words, beside a near miss that shares some of them), and mixed.
// It is deterministic (a fixed seed):
//
//	go run ./persistence/vectortest/evalgen > persistence/vectortest/testdata/retrieval-eval.json
package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
)

// set is the file's shape (vectortest.EvalSet).
type set struct {
	Sessions []session `json:"sessions"`
	Queries  []query   `json:"queries"`
}

type session struct {
	ID       string   `json:"id"`
	Messages []string `json:"messages"`
}

type query struct {
	Session  string   `json:"session"`
	Kind     string   `json:"kind"`
	Query    string   `json:"query"`
	Relevant []uint64 `json:"relevant"`
}

// fact is one message with an identifier and the three queries that should find it.
// Placeholders: {id} the identifier, {x} a second value.
type fact struct {
	msg, ident, para, mixed string
	// near is a near miss: a message of the same session sharing words with para but
	// not answering it.
	near string
	id   func(r *rand.Rand) string
	x    []string
}

type domain struct {
	name     string
	facts    []fact
	filler   []string
	distract []string // a distractor: {id} another identifier of a fact's kind
}

func orderID(r *rand.Rand) string { return fmt.Sprintf("ORD-%d-%05d", 2023+r.Intn(3), r.Intn(100000)) }
func ticket(r *rand.Rand) string  { return fmt.Sprintf("#%d", 1000+r.Intn(9000)) }
func sku(r *rand.Rand) string {
	return fmt.Sprintf("SKU-%c%c%04d", 'A'+rune(r.Intn(26)), 'A'+rune(r.Intn(26)), r.Intn(10000))
}
func tracking(r *rand.Rand) string { return fmt.Sprintf("1Z%03dAA%010d", r.Intn(1000), r.Int63n(1e10)) }
func pick(r *rand.Rand, xs ...string) func(*rand.Rand) string {
	return func(r *rand.Rand) string { return xs[r.Intn(len(xs))] }
}
func errCode(r *rand.Rand) string {
	return pick(r, "E_CONN_RESET", "ERR_TLS_HANDSHAKE", "E_LOCK_TIMEOUT", "ERR_QUOTA_EXCEEDED", "E_DISK_FULL", "ERR_SCHEMA_DRIFT", "E_TOKEN_EXPIRED", "ERR_UPSTREAM_502")(r)
}
func host(r *rand.Rand) string {
	return fmt.Sprintf("%s-prod-%02d.%s", pick(r, "db", "cache", "api", "queue", "search")(r), 1+r.Intn(12), pick(r, "eu-west-1", "us-east-2", "ap-south-1")(r))
}
func pod(r *rand.Rand) string {
	const a = "abcdefghijklmnopqrstuvwxyz0123456789"
	s := make([]byte, 5)
	for i := range s {
		s[i] = a[r.Intn(len(a))]
	}
	return fmt.Sprintf("%s-%x-%s", pick(r, "checkout", "payments", "inventory", "notifier")(r), 0x100000+r.Intn(0xeffff), s)
}
func commit(r *rand.Rand) string { return fmt.Sprintf("%07x", r.Intn(1<<28)) }
func file(r *rand.Rand) string {
	return fmt.Sprintf("internal/%s/%s.go", pick(r, "billing", "auth", "ledger", "sync", "export")(r), pick(r, "invoice", "session", "rounding", "worker", "client", "retry")(r))
}
func fn(r *rand.Rand) string {
	return pick(r, "computeProratedAmount", "refreshTokenLocked", "applyLedgerEntry", "flushPendingBatch", "parseWebhookPayload", "reconcileBalances", "retryWithBackoff", "encodeCursor")(r)
}
func testName(r *rand.Rand) string {
	return pick(r, "TestInvoiceRounding", "TestRefreshRace", "TestLedgerReplay", "TestBatchFlushOrder", "TestWebhookSignature", "TestCursorRoundTrip")(r)
}
func table(r *rand.Rand) string {
	return fmt.Sprintf("%s.%s", pick(r, "analytics", "finance", "growth")(r), pick(r, "daily_active_users", "churned_accounts", "invoice_lines", "signup_funnel", "session_events", "refund_requests")(r))
}
func queryID(r *rand.Rand) string { return fmt.Sprintf("Q-%d", 1000+r.Intn(9000)) }
func dash(r *rand.Rand) string    { return fmt.Sprintf("DASH-%d", 100+r.Intn(900)) }

var domains = []domain{
	{name: "support",
		facts: []fact{
			{msg: "Order {id} was shipped with {x} on Monday, but tracking shows it stuck at the Rotterdam depot since Wednesday.",
				ident: "What is the status of {id}?", para: "Which package has been sitting in Rotterdam for days?", near: "Our Rotterdam office is closed on Sundays, so replies may take a day.", mixed: "Is {id} still stuck at a depot?",
				id: orderID, x: []string{"DHL", "UPS", "PostNL", "FedEx"}},
			{msg: "The customer wants a refund for order {id}: the blender arrived with a cracked jug and they sent photos.",
				ident: "Why does the customer want money back for {id}?", para: "Who got a broken kitchen appliance and wants their money back?", near: "Please send photos if anything arrives damaged.", mixed: "Refund reason for {id}, the broken blender?",
				id: orderID},
			{msg: "Ticket {id} is about a double charge: the card was billed twice, 49.90 each, on the same day.",
				ident: "What is ticket {id} about?", para: "Did the customer get charged two times for one purchase?", near: "The card on file expires next month; the customer may want to update it.", mixed: "Ticket {id} double charge amount",
				id: ticket},
			{msg: "Item {id} is out of stock in the Berlin warehouse until the 14th; the replacement colour is {x}.",
				ident: "When is {id} back in stock?", para: "Which item can't be sent from Germany right now?", near: "The Berlin warehouse handles returns for all of Europe.", mixed: "Berlin stock for {id}",
				id: sku, x: []string{"navy", "graphite", "sand", "olive"}},
			{msg: "Tracking number {id} belongs to the replacement shipment, sent express after the first one was lost.",
				ident: "What is {id}?", para: "What's the tracking code of the package we re-sent after the first went missing?", near: "Express delivery costs 9.95 extra and arrives the next day.", mixed: "Was {id} the express replacement?",
				id: tracking},
			{msg: "The customer changed the delivery address of {id} to their office, Keizersgracht 12, before it left the warehouse.",
				ident: "Where does {id} get delivered now?", para: "Where is the parcel being redirected to, the workplace?", near: "You can change the delivery address until the order leaves the warehouse.", mixed: "New address for {id}",
				id: orderID},
		},
		filler: []string{
			"Thanks for reaching out, let me look into your order history.",
			"I can see several orders on your account; which one do you mean?",
			"Our warehouse usually ships within two business days.",
			"Could you confirm the email address on the account?",
			"I have escalated this to the shipping team and they will reply within 24 hours.",
			"Refunds go back to the original payment method and take 3 to 5 days.",
			"Is there anything else I can help you with today?",
			"The tracking page updates once the carrier scans the parcel.",
			"I understand this is frustrating; we want to get this sorted for you.",
			"Let me check with the warehouse whether the item is in stock.",
			"The delivery was scheduled for Friday between 9 and 12.",
			"Please keep the original packaging in case we need a return.",
		},
		distract: []string{
			"I also checked {id}, which was delivered on time, so that one is fine.",
			"Order {id} from last month has no open issues.",
			"{id} was cancelled at the customer's request before shipping.",
		},
	},
	{name: "incident",
		facts: []fact{
			{msg: "The checkout service started failing at 02:14 UTC with {id} on every call to the payment provider.",
				ident: "When did we first see {id}?", para: "Why were payments failing in the middle of the night?", near: "The payment provider announced maintenance for next weekend.", mixed: "{id} errors at checkout, what time?",
				id: errCode},
			{msg: "Host {id} ran out of memory; the kernel killed postgres and the replica took over after 40 seconds.",
				ident: "What happened on {id}?", para: "Which database server crashed and failed over to the standby?", near: "Memory usage on the cache nodes is at 60 percent, which is normal.", mixed: "Did the replica take over from {id}?",
				id: host},
			{msg: "Pod {id} is in CrashLoopBackOff because the config map is missing the REDIS_URL variable.",
				ident: "Why is {id} crashing?", para: "Which container is crash looping over a missing environment variable?", near: "Redis latency is fine, about 2 ms at p99.", mixed: "{id} missing config variable",
				id: pod},
			{msg: "Rolling back to commit {id} fixed the latency spike; p99 went from 2.3 s back to 180 ms.",
				ident: "What did rolling back to {id} do?", para: "What did we revert to get response times back to normal?", near: "Latency on the search API has a small spike every hour from the cron job.", mixed: "p99 after reverting to {id}",
				id: commit},
			{msg: "The disk on {id} filled up with WAL segments because the archive command kept failing.",
				ident: "Why did {id} run out of disk?", para: "Which server had its storage fill up with log files?", near: "Log retention is 14 days for the application logs.", mixed: "WAL on {id}",
				id: host},
			{msg: "We saw {id} from the load balancer for 6 minutes while the certificate rotated.",
				ident: "How long did {id} last?", para: "What did users see while the TLS cert was being replaced?", near: "The certificate for the staging domain expires in 30 days.", mixed: "{id} during cert rotation",
				id: errCode},
		},
		filler: []string{
			"I'm looking at the dashboards now.",
			"Error rate is back to baseline for the last ten minutes.",
			"Let's keep the incident channel open until we confirm the fix.",
			"Can someone check the alerts from the last hour?",
			"The on-call engineer has been paged.",
			"I'll write the timeline for the postmortem.",
			"Latency looks normal on the other regions.",
			"We should add an alert for this condition.",
			"Restarting the service did not help.",
			"The deploy pipeline is paused until further notice.",
			"Metrics from the database look healthy now.",
			"I'm checking the logs of the affected service.",
		},
		distract: []string{
			"{id} looks fine, nothing unusual in its logs.",
			"We also restarted {id} as a precaution, it came back healthy.",
			"{id} was not involved in this incident.",
		},
	},
	{name: "code",
		facts: []fact{
			{msg: "The rounding bug is in {id}: it converts cents to float64 before multiplying by the tax rate.",
				ident: "What is wrong in {id}?", para: "Which file has the tax rounding problem?", near: "Tax rates are loaded from the config at startup.", mixed: "float conversion bug in {id}",
				id: file},
			{msg: "{id} holds the mutex while it calls the identity provider, so concurrent refreshes deadlock under load.",
				ident: "What's the problem with {id}?", para: "What hangs when many token refreshes happen at once?", near: "The lock around the cache is held only for map updates.", mixed: "does {id} hold the mutex during the call?",
				id: fn},
			{msg: "{id} fails only with -race: two goroutines append to the same slice without synchronisation.",
				ident: "Why does {id} fail?", para: "Which test is broken by a data race?", near: "Running the whole suite with -race takes about six minutes.", mixed: "{id} race on the slice",
				id: testName},
			{msg: "The panic was 'index out of range [5] with length 5' in {id}, when the cursor points past the last page.",
				ident: "Where did the index out of range panic happen, in {id}?", para: "What crashes when paginating beyond the final page?", near: "The last page of results can have fewer items than the page size.", mixed: "{id} panic past last page",
				id: fn},
			{msg: "Commit {id} introduced the regression: it changed the retry loop to reuse the request body after it was read.",
				ident: "What did commit {id} change?", para: "Which commit caused the retry regression?", near: "Retries use exponential backoff starting at 100 ms.", mixed: "regression from {id} in retries",
				id: commit},
			{msg: "The flaky behaviour comes from {id} reading the clock twice; the fix injects a fixed clock in tests.",
				ident: "Why is {id} flaky?", para: "Why do the tests pass sometimes and fail other times?", near: "The clock on the CI runners is synchronised with NTP.", mixed: "clock fix for {id}",
				id: file},
		},
		filler: []string{
			"Let me run the test suite locally.",
			"I'll open a pull request with the fix.",
			"Can you paste the full stack trace?",
			"The CI job is still running.",
			"That function is called from three places.",
			"I added a regression test for this case.",
			"Let me look at the git blame for that file.",
			"The linter is complaining about an unused variable.",
			"We should refactor this module after the release.",
			"Benchmarks show no performance change.",
			"The code review is approved.",
			"I'm not sure this is the root cause yet.",
		},
		distract: []string{
			"{id} looks correct to me, I checked it twice.",
			"I also read {id}, nothing suspicious there.",
			"{id} passes on my machine.",
		},
	},
	{name: "data",
		facts: []fact{
			{msg: "The table {id} double counts users who log in from two devices on the same day.",
				ident: "What is wrong with {id}?", para: "Where are people who use a phone and a laptop counted twice?", near: "Most users log in from one device per day.", mixed: "double counting in {id}",
				id: table},
			{msg: "Query {id} takes 14 minutes because it scans the whole events table without a date filter.",
				ident: "Why is {id} slow?", para: "Which report query is painfully slow?", near: "The events table has about four billion rows.", mixed: "date filter for {id}",
				id: queryID},
			{msg: "Dashboard {id} shows revenue in dollars but the source column is in euros, so March looks 8% too high.",
				ident: "What is wrong on {id}?", para: "Why is March revenue overstated?", near: "Revenue for March was discussed in the finance meeting.", mixed: "{id} currency problem",
				id: dash},
			{msg: "Churn in {id} jumped in week 12 because the trial accounts were included by mistake.",
				ident: "Why did churn jump in {id}?", para: "What caused the spike in cancellations in week 12?", near: "Trial accounts convert at about 18 percent.", mixed: "trial accounts in {id}",
				id: table},
			{msg: "Query {id} returns negative refunds since the amounts are stored as signed integers from the payment export.",
				ident: "Why does {id} return negative values?", para: "Why are some refunds below zero?", near: "Refund requests spiked after the price change.", mixed: "{id} signed refund amounts",
				id: queryID},
			{msg: "Dashboard {id} stopped refreshing after the warehouse credentials were rotated on Tuesday.",
				ident: "Why is {id} not refreshing?", para: "Which dashboard has stale data since Tuesday?", near: "We rotate the warehouse credentials every 90 days.", mixed: "credentials and {id}",
				id: dash},
		},
		filler: []string{
			"Let me pull the numbers for last quarter.",
			"The weekly report goes out on Monday mornings.",
			"I'll add a chart for the conversion rate.",
			"Can you share the notebook with the team?",
			"The numbers match the finance export now.",
			"We need to align the metric definitions first.",
			"I'm rerunning the pipeline for yesterday.",
			"The sample size is too small to conclude anything.",
			"Let's segment the users by country.",
			"The data warehouse is slow this morning.",
			"I'll document the assumptions in the readme.",
			"The stakeholders want the summary by Friday.",
		},
		distract: []string{
			"{id} looks correct after the fix last month.",
			"I compared it with {id}, which has no such issue.",
			"{id} is deprecated and nobody uses it anymore.",
		},
	},
}

func main() {
	r := rand.New(rand.NewSource(39))
	var out set
	for sess := 0; sess < 12; sess++ {
		d := domains[sess%len(domains)]
		id := fmt.Sprintf("%s-%d", d.name, sess/len(domains)+1)
		s := session{ID: id}
		add := func(m string) uint64 {
			s.Messages = append(s.Messages, m)
			return uint64(len(s.Messages))
		}
		type placed struct {
			f   fact
			id  string
			seq uint64
		}
		var facts []placed
		used := map[string]bool{}
		for _, fi := range r.Perm(len(d.facts)) {
			f := d.facts[fi]
			var ident string
			for ident == "" || used[ident] {
				ident = f.id(r)
			}
			used[ident] = true
			// Filler and distractors before the fact.
			for i := 0; i < 3+r.Intn(3); i++ {
				add(d.filler[r.Intn(len(d.filler))])
			}
			other := f.id(r)
			for used[other] || other == ident {
				other = f.id(r)
			}
			add(strings.ReplaceAll(d.distract[r.Intn(len(d.distract))], "{id}", other))
			if f.near != "" {
				add(f.near)
			}
			msg := strings.ReplaceAll(f.msg, "{id}", ident)
			if len(f.x) > 0 {
				msg = strings.ReplaceAll(msg, "{x}", f.x[r.Intn(len(f.x))])
			}
			facts = append(facts, placed{f, ident, add(msg)})
		}
		for i := 0; i < 10; i++ {
			add(d.filler[r.Intn(len(d.filler))])
		}
		for _, p := range facts {
			for _, q := range []struct{ kind, text string }{{"identifier", p.f.ident}, {"paraphrase", p.f.para}, {"mixed", p.f.mixed}} {
				out.Queries = append(out.Queries, query{Session: id, Kind: q.kind, Query: strings.ReplaceAll(q.text, "{id}", p.id), Relevant: []uint64{p.seq}})
			}
		}
		out.Sessions = append(out.Sessions, s)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
