// Package protocol is kraftd's Kafka wire layer: a server that speaks the
// Kafka binary protocol on named listeners, and a pipelined client for
// talking to Kafka-protocol peers. It imports no other kraftd package.
//
// # Framing
//
// Every message is an int32 big-endian size followed by that many bytes.
// A request starts with header v1 (key, version, correlation id, nullable
// int16-length client id) or, when the request version is flexible, header
// v2 (v1 plus a tag section). A response starts with header v0 (the
// correlation id) or, for flexible responses, v1 (plus an empty tag
// section), EXCEPT ApiVersions, whose response header is always v0 so that
// a client can read the answer to a version the server does not know
// (KIP-511).
//
// # What closes a server connection
//
// As in Kafka's SocketServer, the connection is closed without a response
// (and one log line says why) for: a size prefix that is zero, negative or
// above MaxRequestBytes; a header that does not parse; a key unknown to
// kmsg or not registered on the listener; a version outside the registered
// range (for any API but ApiVersions); a body kmsg cannot decode, or one
// it reads more leniently than Kafka's generated readers (a negative
// length on a non-nullable field, see checkStrict); a Handler error or
// panic; no complete request within IdleTimeout (waiting for request
// memory counts); a peer that does not read our responses for IdleTimeout
// (neither when IdleTimeout is negative, Kafka's connections.max.idle.ms=-1);
// a connection of another listener while the inter-broker listener needs
// room past max.connections. Trailing bytes after a
// well-formed body are tolerated, as both kmsg and Kafka tolerate them.
// ApiVersions at an unsupported version is answered with a v0 body
// carrying UNSUPPORTED_VERSION and ApiVersions' own range, and the
// connection stays open.
//
// # Limits
//
// One Server is one Kafka SocketServer, with its own limits:
//
//   - socket.request.max.bytes caps one frame; the body buffer grows as
//     bytes arrive, so a size prefix alone allocates nothing;
//   - queued.max.request.bytes bounds the bytes of requests being read or
//     handled (requestPool): past it, reading pauses, except for one
//     request at a time, which may overdraw;
//   - max.connections and listener.name.NAME.max.connections: at a limit
//     the listener stops accepting until a connection closes (Kafka's
//     ConnectionQuotas); the inter-broker listener is exempt from
//     max.connections when the server has other listeners;
//   - MaxBufferedBytesPerConn bounds the responses queued per connection.
//
// An idle connection holds its two goroutines and about 6 KB besides: no
// read buffer (frameReader), no write buffer, no queue array.
//
// The Client reads responses with the same frameReader (without a pool):
// ClientConfig.MaxResponseBytes caps one response, and its buffer grows as
// the bytes arrive, so a peer the client dials cannot make it allocate a
// size it only announces.
//
// # Responses sent from files
//
// A Handler may return a SplicedResponse: an encoded body with FileRegions
// spliced in (a Fetch's records). The writer sends the encoded parts with
// write(2) and each region with sendfile(2) at an explicit file offset
// (linux, plain TCP), else with a pooled-buffer copy; the size prefix
// counts the regions and the frame costs its whole wire size in the
// connection's budget, so ordering, deadlines and back-pressure are those
// of any response. A region whose Check fails, or whose file ends early,
// closes the connection inside its frame. Server.RegionBytes counts the
// bytes sent each way. See splice.go.
//
// # Goroutine map
//
//	Server
//	  acceptLoop         one per listener; stops when the listener closes;
//	                     waits in admit while its listener has no slot
//	  conn.serve         one per connection: reads a frame, decodes it, runs
//	                     the Handler, encodes the response; strictly one
//	                     request at a time, so responses are in order
//	  conn.writeLoop     one per connection: writes queued responses in as
//	                     few writes as it can; the queue is bounded in bytes
//	Client
//	  runDial            one per dial in progress (backoff, dial, ApiVersions)
//	  clientConn.write   one per connection: assigns correlation ids, batches
//	  clientConn.read    one per connection: matches responses by correlation id
//
// Server.Close and Client.Close stop all of them and wait.
//
// # Client version convention
//
// Client.Request negotiates when req.GetVersion() < 0 (min of kmsg's max
// and the peer's max) and pins otherwise; see Client.Request.
package protocol
