// Command otlpsink is a tiny OTLP/HTTP collector that accepts and discards
// what it is sent (/v1/traces, /v1/metrics, /v1/logs), answering each export
// with an empty success. It counts requests and bytes so a run can show that
// spans really were exported:
//
//	GET /_stats[?reset=1]   {"traces": {"requests": N, "bytes": N}, ...}
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
)

type counter struct{ requests, bytes atomic.Int64 }

func main() {
	listen := flag.String("listen", "127.0.0.1:14318", "address to listen on")
	flag.Parse()

	signals := map[string]*counter{"traces": {}, "metrics": {}, "logs": {}}
	mux := http.NewServeMux()
	for name, c := range signals {
		mux.HandleFunc("/v1/"+name, func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			c.requests.Add(1)
			c.bytes.Add(n)
			// An empty Export*ServiceResponse: zero bytes of protobuf, or {} in JSON.
			if r.Header.Get("content-type") == "application/json" {
				w.Header().Set("content-type", "application/json")
				io.WriteString(w, "{}")
				return
			}
			w.Header().Set("content-type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		})
	}
	mux.HandleFunc("/_stats", func(w http.ResponseWriter, r *http.Request) {
		reset := r.URL.Query().Get("reset") == "1"
		out := map[string]map[string]int64{}
		for name, c := range signals {
			if reset {
				out[name] = map[string]int64{"requests": c.requests.Swap(0), "bytes": c.bytes.Swap(0)}
			} else {
				out[name] = map[string]int64{"requests": c.requests.Load(), "bytes": c.bytes.Load()}
			}
		}
		w.Header().Set("content-type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("otlp sink listening on %s", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
