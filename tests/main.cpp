#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "test_util.h"

int main(int argc, char **argv) {
    test::ignore_user_tuning_db();
    return doctest::Context(argc, argv).run();
}
