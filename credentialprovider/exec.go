package credentialprovider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
	"k8s.io/kubelet/pkg/apis/credentialprovider/install"
)

// ExecTimeout bounds one run of a plugin: the kubelet's catch-all minute
// (pkg/credentialprovider/plugin/plugin.go, ExecPlugin), not configurable
// there either.
const ExecTimeout = time.Minute

// waitDelay is how long a plugin's output is waited for after the plugin
// was killed at its timeout (exec.Cmd.WaitDelay): a child it left holding
// its stdout would otherwise hold the pull as long as the child lives. The
// kubelet waits for such a child; crivk does not.
const waitDelay = 5 * time.Second

// pluginCodecs encode the request and decode the response, through the
// upstream scheme of the exec protocol (k8s.io/kubelet's internal type
// and its three versions, with their conversions), strictly, as the
// kubelet's.
var pluginCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	install.Install(s)
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// execPlugin runs one provider's plugin:
//
//	$ ENV_NAME=ENV_VALUE <bin-dir>/<name> args[0] args[1] <<<request
//
// with crivk's environment followed by the provider's env (which wins),
// the CredentialProviderRequest on stdin and the CredentialProviderResponse
// read from stdout, both in the provider's apiVersion.
type execPlugin struct {
	name, apiVersion, binDir string
	args                     []string
	env                      []string // NAME=VALUE, the provider's
	environ                  func() []string
	timeout                  time.Duration
	encoder                  runtime.Encoder
}

func newExecPlugin(p Provider, binDir string, environ func() []string, timeout time.Duration) (*execPlugin, error) {
	info, ok := runtime.SerializerInfoForMediaType(pluginCodecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, fmt.Errorf("unsupported media type %q", runtime.ContentTypeJSON)
	}
	gv, err := schema.ParseGroupVersion(p.APIVersion)
	if err != nil || !pluginAPIVersions.Has(p.APIVersion) {
		return nil, fmt.Errorf("invalid apiVersion: %q", p.APIVersion)
	}
	e := &execPlugin{name: p.Name, apiVersion: p.APIVersion, binDir: binDir, args: p.Args,
		environ: environ, timeout: timeout, encoder: pluginCodecs.EncoderForVersion(info.Serializer, gv)}
	for _, v := range p.Env {
		e.env = append(e.env, v.Name+"="+v.Value)
	}
	return e, nil
}

// run asks the plugin for image's credentials, with a service account
// token and annotations in token mode. The errors are the kubelet's; one
// from decoding the response never carries its text (it may hold
// credentials).
func (e *execPlugin) run(ctx context.Context, image, token string, annotations map[string]string) (*credentialproviderapi.CredentialProviderResponse, error) {
	log.G(ctx).WithField("pluginName", e.name).WithField("image", image).Debug("Getting image credentials from external exec plugin")
	data, err := runtime.Encode(e.encoder, &credentialproviderapi.CredentialProviderRequest{
		Image: image, ServiceAccountToken: token, ServiceAccountAnnotations: annotations})
	if err != nil {
		return nil, fmt.Errorf("failed to encode auth request: %w", fmt.Errorf("error encoding request: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(e.binDir, e.name), e.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(data), &stdout, &stderr
	cmd.Env = append(e.environ(), e.env...)
	cmd.WaitDelay = waitDelay
	err = cmd.Run()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("error execing credential provider plugin %s for image %s: %w: %s", e.name, image, err, stderr.String())
	}
	out := stdout.Bytes()
	gvk, err := json.DefaultMetaFactory.Interpret(out)
	if err != nil {
		return nil, fmt.Errorf("error reading GVK from response: %w", err)
	}
	if got := gvk.GroupVersion().String(); got != e.apiVersion {
		return nil, fmt.Errorf("apiVersion from credential plugin response did not match expected apiVersion:%s, actual apiVersion:%s", e.apiVersion, got)
	}
	resp, err := decodeResponse(out)
	if err != nil {
		return nil, errors.New("error decoding credential provider plugin response from stdout")
	}
	return resp, nil
}

func decodeResponse(data []byte) (*credentialproviderapi.CredentialProviderResponse, error) {
	obj, gvk, err := pluginCodecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	if gvk.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("failed to decode CredentialProviderResponse, unexpected Kind: %q", gvk.Kind)
	}
	if gvk.Group != credentialproviderapi.GroupName {
		return nil, fmt.Errorf("failed to decode CredentialProviderResponse, unexpected Group: %s", gvk.Group)
	}
	if r, ok := obj.(*credentialproviderapi.CredentialProviderResponse); ok {
		return r, nil
	}
	return nil, fmt.Errorf("unable to convert %T to *CredentialProviderResponse", obj)
}
