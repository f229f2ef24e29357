package lifecycle

// SourcesReady is the kubelet's sourcesReady for Config.APIPodsSynced:
// true once every source of the node's pods (the API's pod informer, the
// static pods' files) has been read in full, so that a runtime pod of none
// of them is an orphan and not a pod of a source not read yet.
func SourcesReady(synced ...func() bool) func() bool {
	return func() bool {
		for _, s := range synced {
			if !s() {
				return false
			}
		}
		return true
	}
}
