#!/bin/bash
grep -cx glacier /app/data.log > /app/total.txt
