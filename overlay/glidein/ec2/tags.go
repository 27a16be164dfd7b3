package ec2

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/pond-htc/pond/overlay/glidein"
)

// Tags that name who owns an instance, besides TagID.
const (
	// TagManagedBy marks every instance pond launched, with the value
	// ManagedBy.
	TagManagedBy = "pond:managed-by"
	// TagLineage names the lineage of the state the instance's glidein
	// resource is recorded in.
	TagLineage = "pond:lineage"
	// TagAddress names the glidein resource's address in that state,
	// such as glidein.burst.
	TagAddress = "pond:address"
	// ManagedBy is the value of TagManagedBy.
	ManagedBy = "pondctl"
)

// maxTagValue is the longest value EC2 takes for a tag.
const maxTagValue = 256

// instanceTags are the tags of glidein req's instance and its volumes:
// pond:id, pond:managed-by = pondctl, the state's lineage and the
// resource's address when req names them, Name (the ID unless the user
// names it), and the user's tags (Config.Tags), which may not use the
// reserved prefixes pond: and aws:.
func (s *Site) instanceTags(req glidein.Request) []types.Tag {
	tags := []types.Tag{
		{Key: aws.String(TagID), Value: aws.String(req.ID)},
		{Key: aws.String(TagManagedBy), Value: aws.String(ManagedBy)},
	}
	if req.Lineage != "" {
		tags = append(tags, types.Tag{Key: aws.String(TagLineage), Value: aws.String(truncate(req.Lineage))})
	}
	if req.Address != "" {
		tags = append(tags, types.Tag{Key: aws.String(TagAddress), Value: aws.String(truncate(req.Address))})
	}
	name := req.ID
	if n, ok := s.cfg.Tags["Name"]; ok {
		name = n
	}
	tags = append(tags, types.Tag{Key: aws.String("Name"), Value: aws.String(name)})
	keys := make([]string, 0, len(s.cfg.Tags))
	for k := range s.cfg.Tags {
		if k != "Name" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(s.cfg.Tags[k])})
	}
	return tags
}

// truncate cuts s to the longest tag value EC2 takes, on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxTagValue {
		return s
	}
	s = s[:maxTagValue]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// tagValue is the value of the tag key among tags, "" when none.
func tagValue(tags []types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// Relabel tags every instance of glidein id with the state lineage and
// the resource address that own it now, replacing what it was launched
// with: a glidein launched by a run whose state was never written (a
// pondctl killed during its first apply) is adopted by a later run under
// that run's lineage.
func (s *Site) Relabel(ctx context.Context, id, lineage, address string) error {
	if !strings.HasPrefix(id, glidein.IDPrefix) || strings.ContainsAny(id, "*?") {
		return fmt.Errorf("id %q: not a glidein's", id)
	}
	live, err := s.find(ctx, id)
	if err != nil || len(live) == 0 {
		return err
	}
	ids := make([]string, 0, len(live))
	for _, in := range live {
		ids = append(ids, aws.ToString(in.InstanceId))
		for _, bd := range in.BlockDeviceMappings {
			if bd.Ebs != nil && bd.Ebs.VolumeId != nil {
				ids = append(ids, aws.ToString(bd.Ebs.VolumeId))
			}
		}
	}
	tags := []types.Tag{{Key: aws.String(TagLineage), Value: aws.String(truncate(lineage))}}
	if address != "" {
		tags = append(tags, types.Tag{Key: aws.String(TagAddress), Value: aws.String(truncate(address))})
	}
	if _, err := s.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: ids, Tags: tags}); err != nil {
		return fmt.Errorf("tagging %s (%s) with lineage %s: %w", id, strings.Join(ids, ", "), lineage, err)
	}
	return nil
}
