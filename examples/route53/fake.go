package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// route53NS is the XML namespace of Route 53's 2013-04-01 API.
const route53NS = "https://route53.amazonaws.com/doc/2013-04-01/"

// fakeRoute53 is a stand-in for the Route 53 API, served on loopback by
// httptest. It answers ChangeResourceRecordSets, GetChange and
// ListHostedZones the way Route 53 does, including its failures:
//
//   - every request must carry a valid SigV4 Authorization header, signed
//     for us-east-1 and route53 by a known account within 5 minutes of the
//     server's clock, or it gets 403 (IncompleteSignature,
//     SignatureDoesNotMatch, or SignatureDoesNotMatch "Signature expired");
//   - an account may make Limit requests per Window (5 per second, as Route
//     53 allows); a request over the limit gets HTTP 400 with the code
//     Throttling and the message "Rate exceeded", and does not count;
//   - a change to a zone whose previous change is still PENDING gets 400
//     PriorRequestNotComplete; a change stays PENDING for Pending;
//   - an invalid change (a negative TTL, an unknown action) gets 400
//     InvalidInput.
//
// It records every request it answers in a log the tests read. Its fields
// are set before it serves; it is safe for concurrent use after that.
type fakeRoute53 struct {
	Limit    int               // requests admitted per Window, per account
	Window   time.Duration     // the rate limit's window
	Pending  time.Duration     // how long a change stays PENDING
	Accounts map[string]string // access key ID -> secret access key
	Zones    []zone
	// Now is the server's clock; nil means time.Now. Tests move it to
	// make a signature expire without waiting 5 minutes.
	Now func() time.Time

	mu        sync.Mutex
	admitted  map[string][]time.Time // per account, the last Limit admissions
	busyUntil map[string]time.Time   // zone ID -> when its pending change is INSYNC
	changes   map[string]changeInfo  // change ID -> its change
	seq       int
	log       []served
}

// zone is a hosted zone of the fake.
type zone struct {
	ID   string // without the /hostedzone/ prefix
	Name string // with the final dot
}

type changeInfo struct {
	submitted time.Time
	insync    time.Time
}

// served is one request the fake answered.
type served struct {
	At         time.Time // server clock, on arrival
	Account    string    // access key ID, "" when authentication failed
	Op         string    // operation: ChangeResourceRecordSets, GetChange, ListHostedZones
	Invocation string    // amz-sdk-invocation-id: one per SDK call, the same on every replay
	Attempt    int       // the X-Retry-Attempt header the Transport set, 0 if none
	SignedAt   time.Time // X-Amz-Date
	Signature  string
	Status     int
	Code       string // error code; "" for a success
}

// Admitted reports whether the request passed the rate limit (and was
// authenticated), so that it counted against the account's rate.
func (s served) Admitted() bool {
	return s.Account != "" && s.Code != "Throttling"
}

// apiError is an error the fake answers with.
type apiError struct {
	status  int
	code    string
	message string
}

func (f *fakeRoute53) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Log returns a copy of the requests answered so far, in arrival order.
func (f *fakeRoute53) Log() []served {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

func (f *fakeRoute53) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return // the client went away
	}
	now := f.now()
	rec := served{
		At:         now,
		Op:         operation(r),
		Invocation: r.Header.Get("Amz-Sdk-Invocation-Id"),
		Signature:  r.Header.Get("Authorization"),
	}
	rec.Attempt, _ = strconv.Atoi(r.Header.Get("X-Retry-Attempt"))

	resp, apiErr := f.handle(r, body, now, &rec)
	if apiErr != nil {
		rec.Status, rec.Code = apiErr.status, apiErr.code
		writeError(w, apiErr, now)
	} else {
		rec.Status = http.StatusOK
		writeXML(w, http.StatusOK, resp, now)
	}
	f.mu.Lock()
	f.log = append(f.log, rec)
	f.mu.Unlock()
}

// handle authenticates, rate-limits and serves one request, as AWS does,
// in that order.
func (f *fakeRoute53) handle(r *http.Request, body []byte, now time.Time, rec *served) (any, *apiError) {
	account, signedAt, apiErr := f.authenticate(r, body, now)
	rec.SignedAt = signedAt
	if apiErr != nil {
		return nil, apiErr
	}
	rec.Account = account

	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.admit(account, now) {
		return nil, &apiError{http.StatusBadRequest, "Throttling", "Rate exceeded"}
	}
	switch rec.Op {
	case "ChangeResourceRecordSets":
		return f.changeRecords(strings.TrimPrefix(r.URL.Path, "/2013-04-01/hostedzone/"), body, now)
	case "GetChange":
		return f.getChange(strings.TrimPrefix(r.URL.Path, "/2013-04-01/change/"), now)
	case "ListHostedZones":
		return f.listZones(), nil
	}
	return nil, &apiError{http.StatusNotFound, "UnknownOperationException", "no such operation: " + r.Method + " " + r.URL.Path}
}

// operation names the Route 53 operation a request calls.
func operation(r *http.Request) string {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/2013-04-01/hostedzone/") && strings.HasSuffix(p, "/rrset"):
		return "ChangeResourceRecordSets"
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/2013-04-01/change/"):
		return "GetChange"
	case r.Method == http.MethodGet && p == "/2013-04-01/hostedzone":
		return "ListHostedZones"
	}
	return r.Method + " " + p
}

// admit reports whether account may make a request at now: whether it made
// fewer than Limit in the Window before now. An admitted request is
// recorded; a refused one is not, so refusals cost the account nothing.
// f.mu must be held.
func (f *fakeRoute53) admit(account string, now time.Time) bool {
	if f.Limit <= 0 {
		return false
	}
	if f.admitted == nil {
		f.admitted = make(map[string][]time.Time)
	}
	times := f.admitted[account]
	if len(times) == f.Limit {
		if now.Sub(times[0]) < f.Window {
			return false
		}
		times = times[1:]
	}
	f.admitted[account] = append(times, now)
	return true
}

// changeBatch is the body of a ChangeResourceRecordSets request.
type changeBatch struct {
	Changes []struct {
		Action string `xml:"Action"`
		RRSet  struct {
			Name string `xml:"Name"`
			Type string `xml:"Type"`
			TTL  *int64 `xml:"TTL"`
		} `xml:"ResourceRecordSet"`
	} `xml:"ChangeBatch>Changes>Change"`
}

// changeRecords serves ChangeResourceRecordSets. f.mu must be held.
func (f *fakeRoute53) changeRecords(path string, body []byte, now time.Time) (any, *apiError) {
	zoneID, ok := strings.CutSuffix(path, "/rrset")
	if !ok || !slices.ContainsFunc(f.Zones, func(z zone) bool { return z.ID == zoneID }) {
		return nil, &apiError{http.StatusNotFound, "NoSuchHostedZone", "No hosted zone found with ID: " + zoneID}
	}
	var batch changeBatch
	if err := xml.Unmarshal(body, &batch); err != nil || len(batch.Changes) == 0 {
		return nil, &apiError{http.StatusBadRequest, "InvalidInput", "Invalid XML ; the change batch has no changes"}
	}
	for i, c := range batch.Changes {
		field := fmt.Sprintf("changeBatch.changes.%d.member", i+1)
		switch {
		case c.Action != "CREATE" && c.Action != "DELETE" && c.Action != "UPSERT":
			return nil, &apiError{http.StatusBadRequest, "InvalidInput", fmt.Sprintf(
				"1 validation error detected: Value '%s' at '%s.action' failed to satisfy constraint: "+
					"Member must satisfy enum value set: [CREATE, DELETE, UPSERT]", c.Action, field)}
		case c.RRSet.TTL != nil && (*c.RRSet.TTL < 0 || *c.RRSet.TTL > 2147483647):
			return nil, &apiError{http.StatusBadRequest, "InvalidInput", fmt.Sprintf(
				"1 validation error detected: Value '%d' at '%s.resourceRecordSet.tTL' failed to satisfy constraint: "+
					"Member must have value greater than or equal to 0", *c.RRSet.TTL, field)}
		}
	}
	if f.busyUntil == nil {
		f.busyUntil = make(map[string]time.Time)
		f.changes = make(map[string]changeInfo)
	}
	if now.Before(f.busyUntil[zoneID]) {
		return nil, &apiError{http.StatusBadRequest, "PriorRequestNotComplete",
			"The request was rejected because Route 53 was still processing a prior request."}
	}
	f.seq++
	id := fmt.Sprintf("C%04d", f.seq)
	c := changeInfo{submitted: now, insync: now.Add(f.Pending)}
	f.changes[id] = c
	f.busyUntil[zoneID] = c.insync
	return changeResponse{XMLName: xml.Name{Space: route53NS, Local: "ChangeResourceRecordSetsResponse"}, Info: c.info(id, now)}, nil
}

// getChange serves GetChange. f.mu must be held.
func (f *fakeRoute53) getChange(id string, now time.Time) (any, *apiError) {
	c, ok := f.changes[id]
	if !ok {
		return nil, &apiError{http.StatusNotFound, "NoSuchChange", "A change with the specified change ID does not exist: " + id}
	}
	return changeResponse{XMLName: xml.Name{Space: route53NS, Local: "GetChangeResponse"}, Info: c.info(id, now)}, nil
}

// listZones serves ListHostedZones. f.mu must be held.
func (f *fakeRoute53) listZones() any {
	resp := listZonesResponse{MaxItems: 100}
	for _, z := range f.Zones {
		resp.Zones = append(resp.Zones, hostedZoneXML{
			ID: "/hostedzone/" + z.ID, Name: z.Name, CallerReference: "ref-" + z.ID, RecordSetCount: 2,
		})
	}
	return resp
}

type changeInfoXML struct {
	ID          string `xml:"Id"`
	Status      string `xml:"Status"`
	SubmittedAt string `xml:"SubmittedAt"`
}

func (c changeInfo) info(id string, now time.Time) changeInfoXML {
	status := "PENDING"
	if !now.Before(c.insync) {
		status = "INSYNC"
	}
	return changeInfoXML{ID: "/change/" + id, Status: status, SubmittedAt: c.submitted.UTC().Format("2006-01-02T15:04:05.000Z")}
}

type changeResponse struct {
	XMLName xml.Name
	Info    changeInfoXML `xml:"ChangeInfo"`
}

type hostedZoneXML struct {
	ID              string `xml:"Id"`
	Name            string `xml:"Name"`
	CallerReference string `xml:"CallerReference"`
	PrivateZone     bool   `xml:"Config>PrivateZone"`
	RecordSetCount  int    `xml:"ResourceRecordSetCount"`
}

type listZonesResponse struct {
	XMLName     xml.Name        `xml:"https://route53.amazonaws.com/doc/2013-04-01/ ListHostedZonesResponse"`
	Zones       []hostedZoneXML `xml:"HostedZones>HostedZone"`
	IsTruncated bool            `xml:"IsTruncated"`
	MaxItems    int             `xml:"MaxItems"`
}

// errorResponse is Route 53's error document.
type errorResponse struct {
	XMLName   xml.Name `xml:"https://route53.amazonaws.com/doc/2013-04-01/ ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

func writeError(w http.ResponseWriter, e *apiError, now time.Time) {
	writeXML(w, e.status, errorResponse{Type: "Sender", Code: e.code, Message: e.message, RequestID: requestID(now)}, now)
}

func writeXML(w http.ResponseWriter, status int, v any, now time.Time) {
	out, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", requestID(now))
	// The SDK corrects its clock from Date; the fake's clock is the one
	// that judges signatures.
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	w.WriteHeader(status)
	io.WriteString(w, xml.Header)
	w.Write(out)
}

func requestID(now time.Time) string {
	sum := sha256.Sum256([]byte(now.String()))
	return hex.EncodeToString(sum[:8])
}
