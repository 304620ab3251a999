package records

// TopicRecord (apiKey 2, version 0) creates a topic. Its partitions follow as
// PartitionRecords.
type TopicRecord struct {
	Name    string
	TopicID UUID
}

func (*TopicRecord) Type() Type            { return TypeTopic }
func (*TopicRecord) LowestVersion() int16  { return 0 }
func (*TopicRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *TopicRecord) Default() { *m = TopicRecord{} }

func (m *TopicRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("TopicRecord", m.Name); err != nil {
		return b, err
	}
	b = appendString(b, m.Name)
	b = appendUUID(b, m.TopicID)
	return appendNoTags(b), nil
}

func (m *TopicRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.Name = r.string()
	m.TopicID = r.uuid()
	r.skipTags()
	return r.done()
}

func (m *TopicRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("name", m.Name)
	o.add("topicId", m.TopicID)
}

// RemoveTopicRecord (apiKey 9, version 0) deletes a topic and all its
// partitions.
type RemoveTopicRecord struct {
	TopicID UUID
}

func (*RemoveTopicRecord) Type() Type            { return TypeRemoveTopic }
func (*RemoveTopicRecord) LowestVersion() int16  { return 0 }
func (*RemoveTopicRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *RemoveTopicRecord) Default() { *m = RemoveTopicRecord{} }

func (m *RemoveTopicRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	return appendNoTags(appendUUID(b, m.TopicID)), nil
}

func (m *RemoveTopicRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.TopicID = r.uuid()
	r.skipTags()
	return r.done()
}

func (m *RemoveTopicRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("topicId", m.TopicID)
}
