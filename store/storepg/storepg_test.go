package storepg_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) storetest.Store {
		return storepgtest.NewTestStore(t)
	})
}
