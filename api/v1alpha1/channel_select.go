package v1alpha1

// Effective sorts the Channels of one agent: per type the one that counts, the oldest not
// being deleted (a younger Channel of the same type is a duplicate and ignored), and those
// being deleted. The Agent controller renders the effective ones; the channel relay serves
// them.
func (l *ChannelList) Effective() (effective map[ChannelType]*Channel, deleting []*Channel) {
	effective = map[ChannelType]*Channel{}
	for i := range l.Items {
		ch := &l.Items[i]
		if ch.DeletionTimestamp != nil {
			deleting = append(deleting, ch)
			continue
		}
		if cur, ok := effective[ch.Spec.Type]; !ok || ch.OlderThan(cur) {
			effective[ch.Spec.Type] = ch
		}
	}
	return effective, deleting
}

// OlderThan orders Channels by creation time, then name.
func (c *Channel) OlderThan(o *Channel) bool {
	return c.CreationTimestamp.Before(&o.CreationTimestamp) ||
		c.CreationTimestamp.Equal(&o.CreationTimestamp) && c.Name < o.Name
}

// IsEnabled is spec.enabled (default true).
func (c *Channel) IsEnabled() bool { return c.Spec.Enabled == nil || *c.Spec.Enabled }
