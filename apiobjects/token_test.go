package apiobjects

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestRequestTokenWaitsOutTheAdmissionsInformer: the NodeRestriction
// admission answers NotFound for a pod its informer has not seen yet; a
// token bound to a pod is asked again, a few times, and one not bound to a
// pod, or a pod that stays NotFound, fails with the API's answer.
func TestRequestTokenWaitsOutTheAdmissionsInformer(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")
	bound := func() *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences:      []string{"api"},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: "u"}}}
	}
	for _, tc := range []struct {
		name      string
		notFounds int // answers NotFound this many times, then a token
		req       *authenticationv1.TokenRequest
		wantCalls int
		wantErr   string
	}{
		{name: "the informer catches up", notFounds: 2, req: bound(), wantCalls: 3},
		{name: "found at once", notFounds: 0, req: bound(), wantCalls: 1},
		{name: "the pod is gone", notFounds: 100, req: bound(), wantCalls: tokenNotFoundRetries + 1,
			wantErr: `requesting a token of service account ns/default: pods "p" not found`},
		{name: "not bound to a pod", notFounds: 100, req: &authenticationv1.TokenRequest{}, wantCalls: 1,
			wantErr: `pods "p" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			calls := 0
			client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "token" {
					return false, nil, nil
				}
				calls++
				if calls <= tc.notFounds {
					return true, nil, notFound
				}
				return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "t"}}, nil
			})
			o := New(fakeCore{client.CoreV1()}, nil)
			tr, err := o.RequestToken(context.Background(), "ns", "default", tc.req)
			if calls != tc.wantCalls {
				t.Errorf("TokenRequest calls: %d, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || tr.Status.Token != "t" {
				t.Fatalf("token %v, error %v; want the token", tr, err)
			}
		})
	}
}
