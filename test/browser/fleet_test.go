package browser

import "testing"

// TestFleetInChromium runs the fleet view's flows (fleet.test.mjs) against a platform of its
// own: filtering, sorting, a live phase change on the one stream, the charts, axe-core's
// accessibility check and the phone width. With AGENTPLANE_UPDATE_SCREENSHOTS=1 its
// screenshot is copied to docs/images/console-fleet.png (the README shows it).
func TestFleetInChromium(t *testing.T) {
	s := startSuite(t)
	s.run(t, "fleet.test.mjs", 9, "AGENTPLANE_TOKEN="+s.token(t, workspace))
	s.screenshot(t, "fleet.png", "console-fleet.png")
}
