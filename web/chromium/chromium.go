// Package chromium starts the system's Chromium (Debian's `chromium`),
// headless, under chromedp, for the console's browser tests and
// benchmarks. It never downloads a browser: without one installed it says
// how to install it.
package chromium

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// InstallHint is how to get the browser on Debian.
const InstallHint = "apt-get install -y chromium"

// Path returns the browser to run: $ONCEJOB_CHROMIUM, else chromium or
// chromium-browser on PATH.
func Path() (string, error) {
	if p := os.Getenv("ONCEJOB_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium not found; install it with: " + InstallHint)
}

// New starts the browser at path, headless, with a fresh profile in
// userDataDir and nothing that reaches the network on its own (no sync,
// component updates or background requests), and returns a chromedp
// context of its first tab. cancel closes the browser.
func New(ctx context.Context, path, userDataDir string) (context.Context, context.CancelFunc) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(userDataDir),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-pings", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	return tabCtx, func() { cancelTab(); cancelAlloc() }
}
