package burnin

const toolIperf3 = "iperf3"

// Iperf3Result is one iperf3 client run. Rates are bits per second, as
// iperf3 reports them.
type Iperf3Result struct {
	Protocol    string // "TCP" or "UDP"
	Streams     int    // -P
	DurationSec float64
	Reverse     bool // -R: the server sent
	// Sent is the sender's view, Received the receiver's; judge a link by
	// ReceivedBitsPerSec, which counts only what arrived.
	SentBytes          int64
	ReceivedBytes      int64
	SentBitsPerSec     float64
	ReceivedBitsPerSec float64
	Retransmits        int64   // TCP sender retransmits
	LostPercent        float64 // UDP
	JitterSec          float64 // UDP; iperf3 prints milliseconds
}

type iperf3Doc struct {
	Start struct {
		TestStart struct {
			Protocol   string  `json:"protocol"`
			NumStreams int     `json:"num_streams"`
			Duration   float64 `json:"duration"`
			Reverse    int     `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	End struct {
		SumSent     *iperf3Sum `json:"sum_sent"`
		SumReceived *iperf3Sum `json:"sum_received"`
		Sum         *iperf3Sum `json:"sum"` // UDP before iperf 3.9
	} `json:"end"`
	Error string `json:"error"`
}

type iperf3Sum struct {
	Seconds     float64 `json:"seconds"`
	Bytes       int64   `json:"bytes"`
	BitsPerSec  float64 `json:"bits_per_second"`
	Retransmits int64   `json:"retransmits"`
	JitterMs    float64 `json:"jitter_ms"`
	LostPercent float64 `json:"lost_percent"`
}

// ParseIperf3 parses `iperf3 -c HOST -J` output. An "error" field wraps
// ErrToolFailed; missing end sums (the run was interrupted) wrap
// ErrIncomplete.
func ParseIperf3(data []byte) (Iperf3Result, error) {
	var doc iperf3Doc
	if err := decodeJSON(toolIperf3, data, &doc); err != nil {
		return Iperf3Result{}, err
	}
	if doc.Error != "" {
		return Iperf3Result{}, &ParseError{Tool: toolIperf3, Line: lineOfKey(data, "error"), Msg: doc.Error, Err: ErrToolFailed}
	}
	ts := doc.Start.TestStart
	res := Iperf3Result{Protocol: ts.Protocol, Streams: ts.NumStreams, DurationSec: ts.Duration, Reverse: ts.Reverse != 0}
	sent, recv := doc.End.SumSent, doc.End.SumReceived
	if sent == nil || recv == nil {
		sent, recv = doc.End.Sum, doc.End.Sum
	}
	if sent == nil {
		return Iperf3Result{}, incomplete(toolIperf3, "no end.sum_sent and end.sum_received")
	}
	res.SentBytes, res.SentBitsPerSec, res.Retransmits = sent.Bytes, sent.BitsPerSec, sent.Retransmits
	res.ReceivedBytes, res.ReceivedBitsPerSec = recv.Bytes, recv.BitsPerSec
	if res.Protocol == "UDP" {
		udp := recv
		if doc.End.Sum != nil {
			udp = doc.End.Sum
		}
		res.LostPercent, res.JitterSec = udp.LostPercent, udp.JitterMs/1e3
	}
	return res, nil
}
