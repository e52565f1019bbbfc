package emaildomains

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
)

// Identities registers sending domains with the provider that sends for them.
type Identities interface {
	// Register makes domain a sending identity signed with the DKIM key privateKeyPEM
	// (PKCS #1 or PKCS #8) under selector. Registering a domain again replaces its key.
	Register(ctx context.Context, domain, selector string, privateKeyPEM []byte) error
	// Deregister removes domain; removing one that is not registered is not an error.
	Deregister(ctx context.Context, domain string) error
}

// SESIdentityClient is the part of *sesv2.Client that SESIdentities uses.
type SESIdentityClient interface {
	CreateEmailIdentity(ctx context.Context, in *sesv2.CreateEmailIdentityInput, optFns ...func(*sesv2.Options)) (*sesv2.CreateEmailIdentityOutput, error)
	PutEmailIdentityDkimSigningAttributes(ctx context.Context, in *sesv2.PutEmailIdentityDkimSigningAttributesInput, optFns ...func(*sesv2.Options)) (*sesv2.PutEmailIdentityDkimSigningAttributesOutput, error)
	PutEmailIdentityMailFromAttributes(ctx context.Context, in *sesv2.PutEmailIdentityMailFromAttributesInput, optFns ...func(*sesv2.Options)) (*sesv2.PutEmailIdentityMailFromAttributesOutput, error)
	DeleteEmailIdentity(ctx context.Context, in *sesv2.DeleteEmailIdentityInput, optFns ...func(*sesv2.Options)) (*sesv2.DeleteEmailIdentityOutput, error)
}

var _ SESIdentityClient = (*sesv2.Client)(nil)

// SESIdentities registers domains as Amazon SES v2 email identities with Bring Your Own DKIM
// (the platform keeps signing with the same key SES signs with), and their return-path
// subdomain (bounce.<domain>, whose MX and SPF the domain publishes) as the custom MAIL FROM
// domain.
type SESIdentities struct {
	Client SESIdentityClient
	// ConfigurationSet, when not empty, is the identity's default configuration set.
	ConfigurationSet string
}

var _ Identities = SESIdentities{}

// Register creates the identity, or replaces the DKIM key of one that exists, then sets its
// MAIL FROM domain.
func (s SESIdentities) Register(ctx context.Context, domain, selector string, privateKeyPEM []byte) error {
	if s.Client == nil {
		return errors.New("ses identities: no Client")
	}
	key, err := sesPrivateKey(privateKeyPEM)
	if err != nil {
		return err
	}
	attrs := &types.DkimSigningAttributes{DomainSigningSelector: aws.String(selector), DomainSigningPrivateKey: aws.String(key)}
	in := &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(domain), DkimSigningAttributes: attrs}
	if s.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.ConfigurationSet)
	}
	_, err = s.Client.CreateEmailIdentity(ctx, in)
	var exists *types.AlreadyExistsException
	if errors.As(err, &exists) {
		_, err = s.Client.PutEmailIdentityDkimSigningAttributes(ctx, &sesv2.PutEmailIdentityDkimSigningAttributesInput{
			EmailIdentity: aws.String(domain), SigningAttributesOrigin: types.DkimSigningAttributesOriginExternal, SigningAttributes: attrs})
	}
	if err != nil {
		return fmt.Errorf("ses: register %s: %w", domain, err)
	}
	_, err = s.Client.PutEmailIdentityMailFromAttributes(ctx, &sesv2.PutEmailIdentityMailFromAttributesInput{
		EmailIdentity:  aws.String(domain),
		MailFromDomain: aws.String(ReturnPathLabel + "." + domain),
		// Until the MX is seen, SES sends from its own bounce domain rather than not at all.
		BehaviorOnMxFailure: types.BehaviorOnMxFailureUseDefaultValue,
	})
	if err != nil {
		return fmt.Errorf("ses: set mail from of %s: %w", domain, err)
	}
	return nil
}

// Deregister deletes the identity.
func (s SESIdentities) Deregister(ctx context.Context, domain string) error {
	if s.Client == nil {
		return errors.New("ses identities: no Client")
	}
	_, err := s.Client.DeleteEmailIdentity(ctx, &sesv2.DeleteEmailIdentityInput{EmailIdentity: aws.String(domain)})
	var gone *types.NotFoundException
	if err != nil && !errors.As(err, &gone) {
		return fmt.Errorf("ses: deregister %s: %w", domain, err)
	}
	return nil
}

// sesPrivateKey is the key as SES takes it for BYODKIM: the base64 of the DER of an RSA key
// in PKCS #1, the PEM body without its armor (what SES's guide produces with openssl).
func sesPrivateKey(privateKeyPEM []byte) (string, error) {
	block, _ := pem.Decode(privateKeyPEM)
	if block == nil {
		return "", errors.New("ses identities: the private key is not PEM")
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return "", fmt.Errorf("ses identities: unsupported PEM block %q", block.Type)
	}
	if err != nil {
		return "", fmt.Errorf("ses identities: parse private key: %w", err)
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return "", fmt.Errorf("ses identities: SES takes RSA keys, not %T", key)
	}
	return base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(rsaKey)), nil
}
