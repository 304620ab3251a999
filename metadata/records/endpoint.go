package records

// BrokerEndpoint is one listener of a broker (RegisterBrokerRecord.EndPoints).
type BrokerEndpoint struct {
	Name             string
	Host             string
	Port             uint16
	SecurityProtocol int16
}

// BrokerFeature is one supported feature range (RegisterBrokerRecord.Features).
type BrokerFeature struct {
	Name                string
	MinSupportedVersion int16
	MaxSupportedVersion int16
}

// ControllerEndpoint and ControllerFeature have the same schema as their
// broker counterparts in RegisterControllerRecord.
type (
	ControllerEndpoint = BrokerEndpoint
	ControllerFeature  = BrokerFeature
)

// Smallest encodings, used to bound array lengths before allocating:
// two empty strings + port + protocol + tag count, and an empty string +
// two int16 + tag count.
const (
	minEndpointSize = 1 + 1 + 2 + 2 + 1
	minFeatureSize  = 1 + 2 + 2 + 1
)

// registrationStrings lists every string of an endpoint and feature list,
// for checkStrings.
func registrationStrings(eps []BrokerEndpoint, fs []BrokerFeature, more ...string) []string {
	out := more
	for _, e := range eps {
		out = append(out, e.Name, e.Host)
	}
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return out
}

func appendEndpoints(b []byte, eps []BrokerEndpoint) []byte {
	b = appendArrayLen(b, len(eps), false)
	for _, e := range eps {
		b = appendString(b, e.Name)
		b = appendString(b, e.Host)
		b = appendUint16(b, e.Port)
		b = appendInt16(b, e.SecurityProtocol)
		b = appendNoTags(b)
	}
	return b
}

func readEndpoint(r *reader, e *BrokerEndpoint) {
	e.Name = r.string()
	e.Host = r.string()
	e.Port = r.uint16()
	e.SecurityProtocol = r.int16()
	r.skipTags()
}

func endpointJSON(o *jsonObject, e *BrokerEndpoint) {
	o.add("name", e.Name)
	o.add("host", e.Host)
	o.add("port", e.Port)
	o.add("securityProtocol", e.SecurityProtocol)
}

func appendFeatures(b []byte, fs []BrokerFeature) []byte {
	b = appendArrayLen(b, len(fs), false)
	for _, f := range fs {
		b = appendString(b, f.Name)
		b = appendInt16(b, f.MinSupportedVersion)
		b = appendInt16(b, f.MaxSupportedVersion)
		b = appendNoTags(b)
	}
	return b
}

func readFeature(r *reader, f *BrokerFeature) {
	f.Name = r.string()
	f.MinSupportedVersion = r.int16()
	f.MaxSupportedVersion = r.int16()
	r.skipTags()
}

func featureJSON(o *jsonObject, f *BrokerFeature) {
	o.add("name", f.Name)
	o.add("minSupportedVersion", f.MinSupportedVersion)
	o.add("maxSupportedVersion", f.MaxSupportedVersion)
}
