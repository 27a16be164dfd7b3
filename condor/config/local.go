package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// defaultExcludeRegexp is HTCondor's default LOCAL_CONFIG_DIR_EXCLUDE_REGEXP:
// hidden files, scripts, editor backups and package manager leftovers.
const defaultExcludeRegexp = `^((\..*)|(.*\.pl)|(.*\.py)|(.*\.sh)|(.*~)|(#.*)|(.*\.rpmsave)|(.*\.rpmnew)|(.*\.dpkg-old)|(.*\.dpkg-dist)|(.*\.cfsaved))$`

// LoadFiles reads the configuration as an HTCondor daemon does: the file at
// path, then each file named in LOCAL_CONFIG_FILE (in order), then every
// file of each LOCAL_CONFIG_DIR directory in lexical order, skipping names
// matching LOCAL_CONFIG_DIR_EXCLUDE_REGEXP. Later files override earlier
// ones. It returns the files read, in order.
func (c *Config) LoadFiles(path string) ([]string, error) {
	if err := c.LoadFile(path); err != nil {
		return nil, err
	}
	read := []string{path}
	for _, f := range c.List("LOCAL_CONFIG_FILE") {
		f = resolvePath(path, f)
		if err := c.LoadFile(f); err != nil {
			return read, err
		}
		read = append(read, f)
	}
	exclude := defaultExcludeRegexp
	if v, ok := c.Get("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP"); ok && strings.TrimSpace(v) != "" {
		exclude = strings.TrimSpace(v)
	}
	re, err := regexp.Compile(exclude)
	if err != nil {
		return read, fmt.Errorf("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP %q: %w", exclude, err)
	}
	for _, dir := range c.List("LOCAL_CONFIG_DIR") {
		dir = resolvePath(path, dir)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return read, fmt.Errorf("LOCAL_CONFIG_DIR %s: %w", dir, err)
		}
		var names []string
		for _, e := range entries {
			if e.IsDir() || re.MatchString(e.Name()) {
				continue
			}
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			f := filepath.Join(dir, n)
			if err := c.LoadFile(f); err != nil {
				return read, err
			}
			read = append(read, f)
		}
	}
	return read, nil
}

// ConfigPath returns the main configuration file a daemon reads: the
// CONDOR_CONFIG environment variable, else /etc/condor/condor_config.
func ConfigPath(lookupEnv func(string) (string, bool)) string {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if p, ok := lookupEnv("CONDOR_CONFIG"); ok && p != "" {
		return p
	}
	return "/etc/condor/condor_config"
}
